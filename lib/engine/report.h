// The run report (design §1): a JSON document with load, prefill and decode times, per-frame
// statistics, throughput, batch and KV statistics, and the device the run used, plus the short
// human summary printed on stderr at the end of a run.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "engine/engine.h"

namespace loom {

struct RunContext {
  std::string model_dir, jobs_path, out_path, backend, dtype;
  bool batch_invariant = false;  // tokens independent of the batch (Backend::batch_invariant)
  double load_s = 0;             // checkpoint to backend-ready
  size_t step_bytes = 0;         // weight bytes one decode step streams
  DeviceInfo device;
};

nlohmann::json run_report(const RunStats& st, const RunContext& ctx);
std::string run_summary(const RunStats& st, const RunContext& ctx);  // a few lines for stderr

}  // namespace loom
