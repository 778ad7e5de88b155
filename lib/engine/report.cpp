#include "engine/report.h"

#include <algorithm>
#include <cstdio>

namespace loom {
namespace {

double safe_div(double a, double b) {
  return b > 0 ? a / b : 0;
}

}  // namespace

nlohmann::json run_report(const RunStats& st, const RunContext& ctx) {
  using nlohmann::json;
  const double step_s = st.prefill_s + st.decode_s;
  json j;
  j["model"] = ctx.model_dir;
  j["jobs"] = ctx.jobs_path;
  j["out"] = ctx.out_path;
  j["backend"] = ctx.backend;
  j["dtype"] = ctx.dtype;
  j["batch_invariant"] = ctx.batch_invariant;
  j["device"] = {{"name", ctx.device.name},
                 {"memory_bytes", ctx.device.memory_bytes},
                 {"weight_bytes", ctx.device.weight_bytes},
                 {"kv_bytes", ctx.device.kv_bytes},
                 {"peak_bytes", ctx.device.peak_bytes}};
  j["time_s"] = {
      {"load", ctx.load_s}, {"run", st.wall_s}, {"prefill", st.prefill_s}, {"decode", st.decode_s}};
  j["jobs_summary"] = {{"read", st.jobs_read},
                       {"accepted", st.jobs_ok},
                       {"failed", st.jobs_failed},
                       {"samples_done", st.samples_done},
                       {"samples_skipped", st.samples_skipped},
                       {"samples_abandoned", st.samples_abandoned},
                       {"stopped", st.stopped}};
  j["generated"] = {{"tokens", st.tokens},
                    {"frames", st.frames},
                    {"tokens_per_s", safe_div(double(st.tokens), st.wall_s)},
                    {"frames_per_s", safe_div(double(st.frames), st.wall_s)}};
  j["frame_s"] = {{"count", st.frame_s.count()},
                  {"mean", st.frame_s.mean()},
                  {"p50", st.frame_s.percentile(0.5)},
                  {"p90", st.frame_s.percentile(0.9)},
                  {"max", st.frame_s.max()}};
  const SchedulerStats& sc = st.scheduler;
  j["batch"] = {{"steps", sc.steps},
                {"prefill_steps", st.prefill_steps},
                {"decode_steps", st.decode_steps},
                {"mean_seqs", safe_div(double(sc.seq_steps), double(sc.steps))},
                {"max_seqs", sc.max_batch},
                {"mean_slots", safe_div(double(sc.slots), double(sc.steps))},
                {"mean_step_ms", 1e3 * safe_div(step_s, double(sc.steps))}};
  j["kv_cache"] = {{"blocks", st.kv_blocks},
                   {"block_size", st.block_size},
                   {"block_bytes", st.kv_block_bytes},
                   {"peak_blocks", st.kv_peak_blocks},
                   {"peak_utilisation", safe_div(double(st.kv_peak_blocks), double(st.kv_blocks))},
                   {"prompt_blocks", sc.prompt_blocks},
                   {"shared_blocks", sc.shared_blocks},
                   {"prefill_slots_saved", sc.prefill_saved},
                   {"preemptions", sc.preemptions},
                   {"recomputed_slots", sc.recomputed}};
  if (ctx.step_bytes > 0 && st.decode_steps > 0) {
    const double gbps = double(ctx.step_bytes) * double(st.decode_steps) / st.decode_s / 1e9;
    j["decode_weight_gbps"] = gbps;
  }
  return j;
}

std::string run_summary(const RunStats& st, const RunContext& ctx) {
  char buf[512];
  std::string s;
  std::snprintf(buf, sizeof buf,
                "loom: %lld jobs (%lld failed), %lld samples, %lld frames, %lld tokens in %.2f s "
                "(%.1f tokens/s) on %s %s\n",
                (long long)st.jobs_read, (long long)st.jobs_failed, (long long)st.samples_done,
                (long long)st.frames, (long long)st.tokens, st.wall_s,
                safe_div(double(st.tokens), st.wall_s), ctx.backend.c_str(), ctx.dtype.c_str());
  s += buf;
  std::snprintf(buf, sizeof buf,
                "loom: load %.2f s, prefill %.2f s, decode %.2f s, mean batch %.1f, KV peak "
                "%d/%d blocks, %lld prompt blocks shared, %lld preemptions\n",
                ctx.load_s, st.prefill_s, st.decode_s,
                safe_div(double(st.scheduler.seq_steps), double(st.scheduler.steps)),
                st.kv_peak_blocks, st.kv_blocks, (long long)st.scheduler.shared_blocks,
                (long long)st.scheduler.preemptions);
  s += buf;
  if (st.stopped) s += "loom: stopped by a signal; in-flight samples were not written\n";
  return s;
}

}  // namespace loom
