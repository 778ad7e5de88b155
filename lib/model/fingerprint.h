// A checkpoint's identity without reading its weights: FNV-1a 64 over config.json (as parsed,
// so whitespace does not count), the mapping table file chosen for it, and every safetensors
// file's size and tensor directory (name, dtype, shape, byte range). Two checkpoints with the
// same fingerprint are the same model for loom up to the weight bytes themselves, which are
// not read (hashing 4 GB per run start would cost more than it guards). Stored in the
// results sidecar and the dataset so a resume or a merge never mixes models.
#pragma once

#include <string>

#include "model/spec.h"

namespace loom {

struct ModelIdentity {
  std::string architecture;  // config.json architectures[0]
  std::string table_path;    // the mapping table that will be used
  std::string fingerprint;   // "fnv1a64:<16 hex digits>"
  ModelSpec spec;            // from config.json by the table (no weights read)
};

// Opens `model_dir` (headers only) and finds its table as load_model would; throws
// loom::Error naming the file on any defect.
ModelIdentity model_identity(const std::string& model_dir, const std::string& table_path);

}  // namespace loom
