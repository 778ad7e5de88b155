// The run report (design §1): a JSON document with load, prefill, decode and mixed step times,
// distributions of frame time, time to first token, time per output token and queue time,
// throughput, batch and KV statistics, and the device the run used, plus the short
// human summary printed on stderr at the end of a run. Each report names its shard, its results
// file and its wall-clock span in UTC, so the N reports of a sharded run can be merged
// (report_merge.h) into totals and rates over the whole run.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "engine/engine.h"

namespace loom {

struct RunContext {
  std::string model_dir, jobs_path, out_path, backend, dtype;
  std::string kv_dtype;          // the KV cache's element ("f32", "bf16", "fp8"); "": not reported
  std::string kv_scales;         // fp8: the scales' source (a file, "default 1.0"); else ""
  bool batch_invariant = false;  // tokens independent of the batch (Backend::batch_invariant)
  double load_s = 0;             // checkpoint to backend-ready
  size_t step_bytes = 0;         // weight bytes one decode step streams
  DeviceInfo device;
  int shard_index = 0, shard_count = 1;  // --shard K/N; 0/1 when unsharded
  // Wall clock just before and just after Engine::run (time_s.kv_pool, then time_s.run). Left
  // unset, the report is taken to be made as the run ends: ended = now, started = ended -
  // wall_s.
  std::chrono::system_clock::time_point started, ended;
};

// Throughput, one definition for `run` reports, the `bench` table and JSON, and
// scripts/plot_bench.py (which reads it from the JSON and never recomputes it): generated
// tokens (frames) divided by the wall time of the engine run, RunStats::wall_s (report
// time_s.run) — every step, prefill, decode and mixed, and the host work between steps.
double tokens_per_s(const RunStats& st);
double frames_per_s(const RunStats& st);

nlohmann::json run_report(const RunStats& st, const RunContext& ctx);
// A distribution block of the report ("frame_s", "ttft_s", "tpot_s", "queue_s"): count, mean,
// min, p50, p90, p95, p99, max (seconds).
nlohmann::json frame_stats(const FrameTimes& t);
// The summary at the end of a run: a few lines for stderr, without the "loom: " prefix.
std::vector<std::string> run_summary(const RunStats& st, const RunContext& ctx);

// ISO 8601 in UTC with milliseconds and a Z suffix: "2026-11-24T22:31:05.123Z" (the time is
// rounded down to the millisecond). parse_utc accepts exactly that form and returns false for
// anything else, including impossible dates.
std::string format_utc(std::chrono::system_clock::time_point t);
bool parse_utc(const std::string& text, std::chrono::system_clock::time_point& t);

}  // namespace loom
