#include "engine/report.h"

#include <algorithm>

#include <cstdio>
#include "core/error.h"

namespace loom {
namespace {

using Clock = std::chrono::system_clock;

double safe_div(double a, double b) {
  return b > 0 ? a / b : 0;
}

// Days since 1970-01-01 of a proleptic Gregorian date and back (H. Hinnant's days_from_civil
// and civil_from_days), so neither direction depends on the process's time zone (no gmtime,
// no timegm).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + int64_t(doe) - 719468;
}

void civil_from_days(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = unsigned(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = int64_t(yoe) + era * 400 + (m <= 2);
}

}  // namespace

std::string format_utc(Clock::time_point t) {
  constexpr int64_t kDayMs = 86400000;
  const int64_t ms = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
  int64_t days = ms / kDayMs, in_day = ms % kDayMs;
  if (in_day < 0) {  // before 1970: round toward the earlier day
    in_day += kDayMs;
    --days;
  }
  int64_t y = 0;
  unsigned m = 0, d = 0;
  civil_from_days(days, y, m, d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
                int(in_day / 3600000), int(in_day / 60000 % 60), int(in_day / 1000 % 60),
                int(in_day % 1000));
  return buf;
}

bool parse_utc(const std::string& text, Clock::time_point& t) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, ms = 0, n = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &y, &mo, &d, &h, &mi, &s, &ms,
                  &n) != 7 ||
      size_t(n) != text.size())
    return false;
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
      s < 0 || s > 59 || ms < 0)
    return false;
  const int64_t days = days_from_civil(y, unsigned(mo), unsigned(d));
  t = Clock::time_point(
      std::chrono::milliseconds(((days * 24 + h) * 60 + mi) * 60000 + int64_t(s) * 1000 + ms));
  // Formatting back rejects what sscanf lets through: Feb 30, signs, short fields (".12Z").
  return format_utc(t) == text;
}

nlohmann::json frame_stats(const FrameTimes& t) {
  // FrameTimes keeps an exact count, mean and max but only a sample of the values, so min is the
  // sample's, like the percentiles: exact below FrameTimes::kCapacity frames.
  return {{"count", t.count()},        {"mean", t.mean()},
          {"min", t.percentile(0)},    {"p50", t.percentile(0.5)},
          {"p90", t.percentile(0.9)},  {"p95", t.percentile(0.95)},
          {"p99", t.percentile(0.99)}, {"max", t.max()}};
}

double tokens_per_s(const RunStats& st) {
  return safe_div(double(st.tokens), st.wall_s);
}

double frames_per_s(const RunStats& st) {
  return safe_div(double(st.frames), st.wall_s);
}

nlohmann::json run_report(const RunStats& st, const RunContext& ctx) {
  using nlohmann::json;
  const double step_s = st.step_s();
  json j;
  j["model"] = ctx.model_dir;
  j["jobs"] = ctx.jobs_path;
  j["out"] = ctx.out_path;
  j["shard"] = {{"index", ctx.shard_index}, {"count", ctx.shard_count}};
  const Clock::time_point unset{};
  const Clock::time_point ended = ctx.ended != unset ? ctx.ended : Clock::now();
  const Clock::time_point started = ctx.started != unset
                                        ? ctx.started
                                        : ended - std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(st.wall_s));
  j["started_utc"] = format_utc(started);
  j["ended_utc"] = format_utc(ended);
  j["backend"] = ctx.backend;
  j["dtype"] = ctx.dtype;
  j["batch_invariant"] = ctx.batch_invariant;
  j["device"] = {{"name", ctx.device.name},
                 {"memory_bytes", ctx.device.memory_bytes},
                 {"weight_bytes", ctx.device.weight_bytes},
                 {"kv_bytes", ctx.device.kv_bytes},
                 {"peak_bytes", ctx.device.peak_bytes}};
  // prefill, decode and mixed: step time by kind (RunStats); they add up to less than run,
  // which also holds the host's work between steps.
  j["time_s"] = {{"load", ctx.load_s},      {"kv_pool", st.pool_s},  {"run", st.wall_s},
                 {"prefill", st.prefill_s}, {"decode", st.decode_s}, {"mixed", st.mixed_s}};
  j["jobs_summary"] = {{"read", st.jobs_read},
                       {"accepted", st.jobs_ok},
                       {"failed", st.jobs_failed},
                       {"failed_earlier", st.jobs_failed_earlier},
                       {"samples_done", st.samples_done},
                       {"samples_skipped", st.samples_skipped},
                       {"samples_abandoned", st.samples_abandoned},
                       {"stopped", st.stopped}};
  j["generated"] = {{"tokens", st.tokens},
                    {"frames", st.frames},
                    {"tokens_per_s", tokens_per_s(st)},
                    {"frames_per_s", frames_per_s(st)}};
  // A stop leaves the in-flight samples unwritten: their tokens are in "tokens" (work done),
  // not in the results.
  if (st.stopped)
    j["generated"]["tokens_unwritten"] = std::max<int64_t>(0, st.tokens - st.tokens_written);
  j["frame_s"] = frame_stats(st.frame_s);
  j["ttft_s"] = frame_stats(st.ttft_s);
  j["tpot_s"] = frame_stats(st.tpot_s);
  j["queue_s"] = frame_stats(st.queue_s);
  const SchedulerStats& sc = st.scheduler;
  j["batch"] = {{"steps", sc.steps},
                {"prefill_steps", st.prefill_steps},
                {"decode_steps", st.decode_steps},
                {"mixed_steps", st.mixed_steps},
                {"mean_seqs", safe_div(double(sc.seq_steps), double(sc.steps))},
                {"max_seqs", sc.max_batch},
                {"max_slots", sc.max_slots},
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
  if (!ctx.kv_dtype.empty()) j["kv_cache"]["dtype"] = ctx.kv_dtype;
  if (!ctx.kv_scales.empty()) j["kv_cache"]["scales"] = ctx.kv_scales;
  if (ctx.step_bytes > 0 && st.decode_steps > 0) {
    const double gbps = double(ctx.step_bytes) * double(st.decode_steps) / st.decode_s / 1e9;
    j["decode_weight_gbps"] = gbps;
  }
  return j;
}

std::vector<std::string> run_summary(const RunStats& st, const RunContext& ctx) {
  char buf[512];
  std::vector<std::string> lines;
  std::snprintf(buf, sizeof buf,
                "%lld jobs (%lld failed%s), %lld samples, %lld frames, %lld tokens in %.2f s "
                "(%.1f tokens/s, %.2f frames/s) on %s %s",
                (long long)st.jobs_read, (long long)st.jobs_failed,
                st.jobs_failed_earlier > 0
                    ? cat(", ", st.jobs_failed_earlier, " more in an earlier run").c_str()
                    : "",
                (long long)st.samples_done, (long long)st.frames, (long long)st.tokens, st.wall_s,
                tokens_per_s(st), frames_per_s(st), ctx.backend.c_str(), ctx.dtype.c_str());
  lines.push_back(buf);
  std::snprintf(buf, sizeof buf,
                "load %.2f s; steps: %lld prefill %.2f s, %lld decode %.2f s, %lld mixed %.2f s; "
                "mean batch %.1f, KV peak %d/%d blocks, %lld prompt blocks shared, %lld "
                "preemptions",
                ctx.load_s, (long long)st.prefill_steps, st.prefill_s, (long long)st.decode_steps,
                st.decode_s, (long long)st.mixed_steps, st.mixed_s,
                safe_div(double(st.scheduler.seq_steps), double(st.scheduler.steps)),
                st.kv_peak_blocks, st.kv_blocks, (long long)st.scheduler.shared_blocks,
                (long long)st.scheduler.preemptions);
  lines.push_back(buf);
  if (st.frame_s.count() > 0 || st.ttft_s.count() > 0) {
    std::snprintf(buf, sizeof buf,
                  "latency p50/p99: frame %.3f/%.3f s, time to first token %.3f/%.3f s, per "
                  "output token %.2f/%.2f ms, queue %.3f/%.3f s",
                  st.frame_s.percentile(0.5), st.frame_s.percentile(0.99),
                  st.ttft_s.percentile(0.5), st.ttft_s.percentile(0.99),
                  1e3 * st.tpot_s.percentile(0.5), 1e3 * st.tpot_s.percentile(0.99),
                  st.queue_s.percentile(0.5), st.queue_s.percentile(0.99));
    lines.push_back(buf);
  }
  if (st.stopped)
    lines.push_back(cat("stopped by a signal; ", st.samples_abandoned,
                        " samples read were not written (", st.samples_abandoned_started,
                        " running, with ", std::max<int64_t>(0, st.tokens - st.tokens_written),
                        " of the tokens above; ",
                        st.samples_abandoned - st.samples_abandoned_started,
                        " waiting to start); --resume runs them"));
  return lines;
}

}  // namespace loom
