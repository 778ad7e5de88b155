// A token dataset's files read back (dataset.h): what `--resume` (dataset_resume.cpp) and
// `loom verify` (dataset_verify.cpp) both check.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loom {

struct DataFileInfo {
  std::string problem;                  // "" when whole and self-consistent, else what is wrong
  std::string model, config_hash;       // its __metadata__'s, once the header parsed
  std::vector<nlohmann::json> entries;  // its own manifest lines, in order (when no problem)
};

// Reads the header of data file `path` (named `name` in the folder): the loom-dataset format,
// a size that matches its tensors, and a manifest whose entries name this file with rows equal
// to its sample_offsets. Reads the header and offsets only, never the tokens.
DataFileInfo read_data_file(const std::string& path, const std::string& name);

// A SHA256SUMS file: file name → 64 hex digits. A missing file is an empty map; a line that is
// not "<64 hex>  <name>" is an error naming the file and line.
std::map<std::string, std::string> read_sums(const std::string& path);

}  // namespace loom
