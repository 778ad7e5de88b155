// `loom inspect MODEL_DIR`: a readable account of what load_model made of a checkpoint — the
// architecture and table, every spec field, each role with the HF tensor(s) it came from,
// its shape and dtype, and the totals (parameters, bytes, bytes streamed per decode step).
#pragma once

#include <string>

#include "model/mapping.h"

namespace loom {

std::string describe_model(const LoadedModel& model);

// 2043973632 → "2,043,973,632"
std::string group_thousands(int64_t n);

}  // namespace loom
