// A checkpoint's identity without reading its weights: FNV-1a 64 over config.json (as parsed,
// so whitespace does not count), the mapping table file chosen for it, and every safetensors
// file's size and tensor directory (name, dtype, shape, byte range). Two checkpoints with the
// same fingerprint are the same model for loom up to the weight bytes themselves (hashing 4 GB
// per run start would cost more than it guards); `weights_sample` hashes a few KB of each
// tensor instead, so a weight file rewritten in place with the same shapes (another training
// step) is told apart. Both are stored in the results side file, the fingerprint in the
// dataset too, so a resume or a merge never mixes models.
#pragma once

#include <string>
#include <vector>

#include "model/spec.h"

namespace loom {

struct ModelIdentity {
  std::string architecture;        // config.json architectures[0]
  std::string table_path;          // the mapping table that will be used
  std::string fingerprint;         // "fnv1a64:<16 hex digits>"
  std::string weights_sample;      // "fnv1a64:<16 hex digits>" of each tensor's first, middle
                                   // and last 4 KB (fewer for small tensors), in directory order
  ModelSpec spec;                  // from config.json by the table (no weights read)
  std::vector<std::string> files;  // what it was read from (model_input_files)
};

// Opens `model_dir` (headers only) and finds its table as load_model would; throws
// loom::Error naming the file on any defect.
ModelIdentity model_identity(const std::string& model_dir, const std::string& table_path);

// The files a command reads the model from (headers only): the checkpoint's config, shard
// index and weight files, and the mapping table chosen for it. No output may be one of them.
// (model_identity lists them too, in ModelIdentity::files.)
std::vector<std::string> model_input_files(const std::string& model_dir,
                                           const std::string& table_path);

}  // namespace loom
