// A token dataset's files read back (dataset.h): what `--resume` (dataset_resume.cpp), `loom
// verify` (dataset_verify.cpp) and `loom merge --dataset` (dataset_merge.cpp) share.
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
  nlohmann::json header;                // its safetensors header (tensors and __metadata__)
  uint64_t data_start = 0;              // where the tensors' data_offsets count from (8 + header)
};

// Reads the header of data file `path` (named `name` in the folder): the loom-dataset format,
// a size that matches its tensors, and a manifest whose entries name this file with rows equal
// to its sample_offsets. Reads the header and offsets only, never the tokens.
DataFileInfo read_data_file(const std::string& path, const std::string& name);

// A SHA256SUMS file as `sha256sum -c` reads it: "<64 hex digits> <' ' or '*'><name>", CRLF
// ends allowed. `sums`: file name → the digits in lowercase; `problems`: "line N: ..." for a
// line of another form. A missing file reads as empty.
struct Sums {
  std::map<std::string, std::string> sums;
  std::vector<std::string> problems;
};
Sums read_sums(const std::string& path);

// Whether a dataset.json's totals say it holds nothing (files, samples and rows all 0): a shard
// given no jobs, whose manifest loom 0.5.0 did not create.
bool empty_totals(const nlohmann::json& info);

// Why two indexes (dataset.json: model, form, jobs_read and run_identity; side files:
// jobs_read) cannot be shards of one run: "" when they can, else the first key that differs,
// with both values ("jobs_read {...} and {...}"). A key one of them lacks (an unfinished shard,
// an older loom) is not compared.
std::string shards_differ(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace loom
