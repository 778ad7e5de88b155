// `loom inspect MODEL_DIR`: a readable account of what load_model made of a checkpoint — the
// architecture and table, every spec field, each role with the HF tensor(s) it came from,
// its shape and dtype, and the totals (parameters, bytes, bytes streamed per decode step).
// The same account as JSON for `loom inspect --json`. (The job-line template needs the jobs
// reader's rules, a layer above this one: app/inspect.cpp adds it.)
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/mapping.h"

namespace loom {

std::string describe_model(const LoadedModel& model);

// {"model", "architecture", "table", "files", "file_bytes", "tensors", "dtype", "spec": {...},
//  "roles": [{"role", "layers", "shape", "dtype", "source", "note", "bytes"}], "parameters",
//  "bytes", "step_bytes", "warnings", "notes"}; "layers" is null for roles outside the layer
//  stack.
nlohmann::ordered_json describe_model_json(const LoadedModel& model);

// 2043973632 → "2,043,973,632"
std::string group_thousands(int64_t n);

// The ids that end a sample: "2", or "128001, 128008, 128009" for an eos_token_id list.
std::string eos_ids_text(const ModelSpec& s);

}  // namespace loom
