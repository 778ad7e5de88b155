// `loom bench`: synthetic frame jobs on any checkpoint (issue 3 §7, issue 4 §4). Latency runs
// (one per batch size: B jobs of C context frames + N generated frames at once) report s/frame,
// time to first token, tokens/s and the weight bytes streamed per decode step against the
// device's measured copy bandwidth; a throughput run (--num-jobs) reports tokens/s, frames/s, KV
// use and achieved bandwidth and FLOP rate against the measured ceilings. A backend that
// measures no ceiling (the cpu) shows n/a for it and for what is relative to it, JSON null.
#include <algorithm>
#include <cstdio>
#include <functional>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/setup.h"
#include "core/error.h"
#include "engine/report.h"
#include "engine/sequence.h"
#include "io/outputs.h"

namespace loom {
namespace {

using nlohmann::json;

// 1.234 with `digits` decimals and a unit: a table cell.
std::string fixed(double v, int digits, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", digits, v, unit);
  return buf;
}

// A rate for the tables: whole units from 100 up, else three significant digits (a tiny model
// on the cpu streams well under 1 GB/s, which "%.0f" printed as 0).
std::string rate(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : "%.3g", v);
  return buf;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Job i of a synthetic set; jobs in the same group (i / group) share their context frames.
Job synthetic_job(const ModelSpec& sp, int i, int group, int ctx, int frames) {
  Job j = synthetic_frame_job(sp, "bench-" + std::to_string(i), i + 1,
                              uint32_t(group > 0 ? i / group : i) * 7919u + 17u, ctx, frames);
  j.sampling.temperature = 0.9f;  // Terra's reference setting
  j.sampling.seed = uint64_t(i);
  return j;
}

// A profiled run's kernels (Backend::kernel_times, eager launches with an event pair each) by
// phase, with ms a step; and the decode steps' split: attention (paged attention and its RoPE +
// KV write) and the rest of the step (GEMMs, norms, activations, lm_head, sampling), ms a step.
// Where the backend timed sampled decode steps as graphs (the CUDA backend's "decode graph"
// phase: the step whole and without attention) the split is theirs: event pairs around eager
// launches overstate the short kernels (H200 FP8, 256 jobs: the rest 2.53 ms eagerly against
// 1.75 from the graphs of the same run,
// bench/results/2026-11-28-h200-bench-profile-graph-split.json).
struct Profile {
  json kernels = json::array();
  double decode_attention_ms = 0, decode_rest_ms = 0;  // 0 when no decode step was profiled
};

Profile profile_run(Backend& be, const std::function<void()>& run) {
  be.set_profiling(true);
  run();
  be.set_profiling(false);
  Profile p;
  double graph_step = 0, graph_rest = 0;  // ms a sampled decode step, whole / without attention
  for (const KernelTime& k : be.kernel_times()) {
    const double per_step = k.ms / double(std::max<int64_t>(1, k.steps));
    p.kernels.push_back({{"name", k.name},
                         {"phase", k.phase},
                         {"ms", k.ms},
                         {"calls", k.calls},
                         {"steps", k.steps},
                         {"ms_per_step", per_step}});
    if (k.phase == "decode graph") (k.name == "step" ? graph_step : graph_rest) = per_step;
    if (k.phase != "decode") continue;
    const bool attention = k.name == "paged_attention" || k.name == "rope_kv_write";
    (attention ? p.decode_attention_ms : p.decode_rest_ms) += per_step;
  }
  if (graph_step > 0) {
    p.decode_attention_ms = graph_step - graph_rest;
    p.decode_rest_ms = graph_rest;
  }
  return p;
}

void print_profile(std::FILE* tab, const Profile& p) {
  std::string phase;
  for (const json& k : p.kernels) {
    if (k["phase"] != phase)
      std::fprintf(tab, "         %s steps (%lld), ms a step:\n",
                   k["phase"].get<std::string>().c_str(), k["steps"].get<long long>());
    phase = k["phase"];
    std::fprintf(tab, "           %-28s %9.3f ms a step %10.3f ms in all %8lld calls\n",
                 k["name"].get<std::string>().c_str(), k["ms_per_step"].get<double>(),
                 k["ms"].get<double>(), k["calls"].get<long long>());
  }
}

struct Measured {
  RunStats st;
  std::vector<double> ttft;     // per sample: admission → first token
  std::vector<double> frame_s;  // every generated frame's decode time (decode_frame_times)
};

// A sample's frame times with the prompt's prefill left out (bench/README.md, "s/frame"). A
// frame's time runs from the step that sampled the previous frame's last token to the step
// that samples its own last token: P decode steps (the previous frame's action chunk, which
// samples its first token, then P - 1 single slots). The first frame's first token is sampled
// by the prompt's prefill, so its time runs from that token (P - 1 decode steps) and is scaled
// by P / (P - 1) to a whole frame.
void decode_frame_times(const JobResult& r, int P, std::vector<double>& out) {
  for (size_t f = 0; f < r.frame_s.size(); f++) {
    if (f > 0)
      out.push_back(r.frame_s[f]);
    else if (P > 1)  // (JobResult::frame_s[0] runs from admission, prefill_s to the first token)
      out.push_back((r.frame_s[0] - r.prefill_s) * double(P) / double(P - 1));
  }
}

// The option that sizes the pool by memory on this backend.
const char* pool_option(const OpenedModel& om) {
  return om.backend_name == "cpu" ? "--kv-cache-gib" : "--gpu-memory-fraction";
}

// The KV blocks one synthetic job holds at most (its longest round), as the engine counts
// them: a pool with fewer fails every job.
struct JobBlocks {
  int slots = 0, blocks = 0;
};
JobBlocks job_blocks(const ModelSpec& sp, int ctx, int frames, int block_size) {
  const Sequence s(std::make_shared<const Job>(synthetic_job(sp, 0, 0, ctx, frames)), 0, sp);
  return {s.max_round_slots(), (s.max_round_slots() + block_size - 1) / block_size};
}

// Refuses a pool that cannot hold one job of the timed runs (the engine would fail each job
// with a message for a jobs file), naming the options that size it.
void check_pool(const BenchArgs& a, const OpenedModel& om, const RunStats& st) {
  const JobBlocks need = job_blocks(om.model.spec, a.context_frames, a.frames, st.block_size);
  if (need.blocks <= st.kv_blocks) return;
  const std::string job = cat("one bench job (--context-frames ", a.context_frames, ", --frames ",
                              a.frames, ") needs ", need.blocks, " KV blocks of ", st.block_size,
                              " slots (--block-size) for its round of ", need.slots, " slots");
  if (a.engine.kv_blocks > 0)
    fail("--kv-blocks ", a.engine.kv_blocks, ": expected at least ", need.blocks, ": ", job,
         "; the pool holds ", st.kv_blocks);
  fail("bench: ", job, "; the pool holds ", st.kv_blocks, "; expected a larger pool: raise ",
       pool_option(om), " or give --kv-blocks ", need.blocks);
}

// Refuses latency rows the pool cannot hold at once: a row of more jobs than fit would run
// them in turns (or preempt), another measurement than its label.
void check_batches(const BenchArgs& a, const OpenedModel& om, const RunStats& st) {
  const JobBlocks need = job_blocks(om.model.spec, a.context_frames, a.frames, st.block_size);
  const int64_t fit = st.kv_blocks / need.blocks;
  for (int batch : a.batch_sizes)
    LOOM_CHECK(batch <= fit, "--batch-sizes ", batch, ": the KV pool holds ", fit,
               " bench jobs at once (", st.kv_blocks, " blocks; a job's round takes ", need.blocks,
               "); expected at most ", fit, ", or a larger pool (", pool_option(om),
               ", --kv-blocks)");
}

Measured run_synthetic(Backend& backend, const ModelSpec& spec, EngineOptions opt, int n_jobs,
                       int group, int ctx, int frames) {
  Engine engine(spec, backend, opt);
  int next = 0;
  Measured m;
  m.st = engine.run(
      [&](Job& j, JobError&, bool& ok) {
        if (next == n_jobs) return false;
        j = synthetic_job(spec, next++, group, ctx, frames);
        ok = true;
        return true;
      },
      [&](const JobResult& r) {
        LOOM_CHECK(r.ok, "bench job failed: ", r.error);
        m.ttft.push_back(r.prefill_s);
        decode_frame_times(r, spec.image_tokens, m.frame_s);
      });
  return m;
}

// FLOPs of the run: linear layers per slot, lm_head per sampled slot, attention per pair.
double run_flops(const RunStats& st, const ModelSpec& sp) {
  const double H = sp.hidden, qd = sp.q_dim(), kvd = sp.kv_dim(), I = sp.intermediate;
  const double per_slot = 2.0 * sp.layers * (H * (qd + 2 * kvd) + qd * H + 3 * H * I);
  return per_slot * double(st.scheduler.slots) + 2.0 * H * sp.vocab * double(st.scheduler.sampled) +
         4.0 * sp.layers * qd * double(st.scheduler.attn_pairs);
}

// Bytes the run must move: the streamed weights once per step, each sequence's KV once per step.
double weight_bytes(const RunStats& st, size_t step_bytes) {
  return double(step_bytes) * double(st.scheduler.steps);
}
// once: each block once a step (a group's shared blocks read once, not once per sequence).
double kv_bytes(const RunStats& st, const ModelSpec& sp, double kv_elem, bool once = false) {
  return double(once ? st.scheduler.kv_reads_once : st.scheduler.kv_reads) * sp.layers * 2.0 *
         sp.kv_dim() * kv_elem;
}

}  // namespace

int bench_command(const BenchArgs& a) {
  // --json -: the JSON alone on stdout, the table on stderr.
  const bool json_stdout = a.json_out == "-";
  FILE* tab = json_stdout ? stderr : stdout;
  if (!a.json_out.empty())
    check_file_output("bench: ", "--json", a.json_out, a.overwrite,
                      model_inputs(a.model, a.engine));
  OpenedModel om = open_model(a.model, a.engine, false);
  const ModelSpec& spec = om.model.spec;
  check_synthetic_frames(spec, a.context_frames, a.frames);  // as run checks a job's
  Backend& be = *om.backend;
  // Every run's engine options: its pool must hold one job of the timed runs.
  auto options = [&] {
    EngineOptions opt = engine_options(a.engine, om);
    opt.on_start = [&](const RunStats& st) { check_pool(a, om, st); };
    return opt;
  };
  const double copy_gbps = be.measure_copy_bandwidth_gbps();
  const double gemm_tflops = be.measure_gemm_tflops();
  const size_t step_bytes = om.step_bytes();
  const DeviceInfo dev = be.device_info();
  const double floor_s =
      copy_gbps > 0 ? double(spec.image_tokens) * double(step_bytes) / (copy_gbps * 1e9) : 0;

  // The cpu backend measures no ceilings (0): ratios against them are not a number to print.
  const bool have_copy = copy_gbps > 0, have_gemm = gemm_tflops > 0;
  const json no_value;  // null

  json out;
  out["model"] = a.model;
  out["architecture"] = spec.architecture;
  out["backend"] = om.backend_name;
  out["dtype"] = om.dtype_name;
  out["kv_dtype"] = om.kv_dtype;
  out["kv_scales"] = om.kv_scales_source;
  out["batch_invariant"] = om.batch_invariant;
  out["device"] = dev.name;
  out["load_s"] = om.load_s;
  out["step_weight_bytes"] = step_bytes;
  out["copy_gbps"] = have_copy ? json(copy_gbps) : no_value;
  out["gemm_tflops"] = have_gemm ? json(gemm_tflops) : no_value;
  out["floor_s_per_frame"] = have_copy ? json(floor_s) : no_value;
  out["context_frames"] = a.context_frames;
  out["frames"] = a.frames;
  out["provenance"] = bench_provenance(a, om);

  // Warm-up (graphs, handles, caches), before the table: a pool too small is refused here.
  const RunStats warm = run_synthetic(be, spec, options(), 1, 0, a.context_frames, 1).st;
  check_batches(a, om, warm);
  // Bytes of a KV element as the pool holds it (the cpu keeps fp8 KV in f32 after its round
  // trip: an fp8 pool there is not half of bf16's).
  const double kv_elem =
      double(warm.kv_block_bytes) / (double(warm.block_size) * spec.layers * 2.0 * spec.kv_dim());

  std::fprintf(tab, "loom bench: %s on %s (%s, %s%s), load %.2f s\n", spec.architecture.c_str(),
               dev.name.c_str(), om.backend_name.c_str(), om.dtype_name.c_str(),
               om.batch_invariant ? ", batch-invariant" : "", om.load_s);
  std::fprintf(tab,
               "ceilings: copy %s, bf16 GEMM %s; weights per step %.3f GB; floor %s at batch 1\n\n",
               have_copy ? cat(int64_t(copy_gbps + 0.5), " GB/s").c_str() : "n/a",
               have_gemm ? cat(int64_t(gemm_tflops + 0.5), " TFLOP/s").c_str() : "n/a",
               double(step_bytes) / 1e9, have_copy ? fixed(floor_s, 3, " s/frame").c_str() : "n/a");
  // mega: the share of decode steps that ran the megakernel (one launch a step, issue 15).
  std::fprintf(tab, "%6s %10s %10s %10s %12s %10s %9s %6s\n", "batch", "s/frame", "x floor",
               "ttft s", "tokens/s", "GB/s", "% copy", "mega");

  for (int batch : a.batch_sizes) {
    EngineOptions opt = options();
    opt.scheduler.max_seqs = std::max(opt.scheduler.max_seqs, batch);
    std::vector<double> sf, tps, gbps, ttft;
    Measured last;
    const int64_t mega0 = be.megakernel_steps();
    int64_t decode_steps = 0;
    for (int r = 0; r < std::max(1, a.repeats); r++) {
      last = run_synthetic(be, spec, opt, batch, 0, a.context_frames, a.frames);
      const RunStats& st = last.st;
      decode_steps += st.decode_steps;
      sf.push_back(median(last.frame_s));  // prefill excluded (decode_frame_times)
      tps.push_back(tokens_per_s(st));
      gbps.push_back(
          st.decode_s > 0 ? double(step_bytes) * double(st.decode_steps) / st.decode_s / 1e9 : 0);
      ttft.push_back(median(last.ttft));
    }
    const double s = median(sf), g = median(gbps);
    const int64_t mega = be.megakernel_steps() - mega0;
    std::fprintf(
        tab, "%6d %10.4f %10s %10.4f %12.0f %10s %9s %6s\n", batch, s,
        have_copy ? fixed(s / floor_s, 2, "").c_str() : "n/a", median(ttft), median(tps),
        rate(g).c_str(), have_copy ? fixed(100 * g / copy_gbps, 1, "%").c_str() : "n/a",
        mega > 0 ? fixed(100.0 * double(mega) / double(std::max<int64_t>(1, decode_steps)), 0, "%")
                       .c_str()
                 : "-");
    json row = {{"batch", batch},
                {"s_per_frame", s},
                {"x_floor", have_copy ? json(s / floor_s) : no_value},
                {"ttft_s", median(ttft)},
                {"tokens_per_s", median(tps)},
                {"decode_weight_gbps", g},
                {"pct_copy", have_copy ? json(100 * g / copy_gbps) : no_value},
                {"decode_steps", last.st.decode_steps},
                {"megakernel_steps", mega},
                {"decode_steps_all_repeats", decode_steps},
                {"prefill_s", last.st.prefill_s},
                {"decode_s", last.st.decode_s},
                {"mixed_s", last.st.mixed_s},
                {"repeats", sf}};
    if (a.profile) {
      const Profile p =
          profile_run(be, [&] { run_synthetic(be, spec, opt, batch, 0, a.context_frames, 1); });
      print_profile(tab, p);
      row["kernels"] = p.kernels;
    }
    out["latency"].push_back(row);
  }

  if (a.num_jobs > 0) {
    std::fprintf(tab, "\n%8s %8s %12s %10s %10s %8s %8s %8s %9s %8s %8s %8s %8s %9s %8s %8s\n",
                 "jobs", "group", "tokens/s", "frames/s", "mean seqs", "W GB/s", "KV GB/s",
                 "TFLOP/s", "% roof", "step ms", "gpu ms", "attn ms", "rest ms", "KV peak",
                 "shared", "preempt");
    std::vector<int> groups;  // 0: every job its own context
    if (!(a.shared_only && a.shared_group > 1)) groups.push_back(0);
    if (a.shared_group > 1) groups.push_back(a.shared_group);
    std::vector<double> tps_of, roof_of;  // per entry of groups
    for (int group : groups) {
      EngineOptions opt = options();
      be.set_step_timing(true);
      Measured m = run_synthetic(be, spec, opt, a.num_jobs, group, a.context_frames, a.frames);
      const StepTiming timing = be.step_timing();
      be.set_step_timing(false);
      const RunStats& st = m.st;
      // Decode steps replayed from graphs: the device's time a step and the host's time staging
      // and launching it (behind the previous step's device work unless --no-overlap); the
      // run's wall time outside the steps (reading jobs, admission) a step.
      const bool timed = timing.steps > 0;
      const double gpu_ms = timed ? 1e3 * timing.gpu_s / double(timing.steps) : 0;
      const double step_host_ms = timed ? 1e3 * timing.host_s / double(timing.steps) : 0;
      const int64_t n_steps = st.prefill_steps + st.decode_steps + st.mixed_steps;
      const double engine_host_ms =
          1e3 * (st.wall_s - st.step_s()) / double(std::max<int64_t>(1, n_steps));
      const double t = st.step_s();  // device work: the rates of bytes and FLOPs
      const double wb = weight_bytes(st, step_bytes), kb = kv_bytes(st, spec, kv_elem);
      const double gb = (wb + kb) / t / 1e9;
      const double tf = run_flops(st, spec) / t / 1e12;
      // Roofline time of the run's work: its bytes at copy bandwidth or its FLOPs at the GEMM
      // rate, whichever is longer (a bound over the whole run, not per phase).
      auto roofline = [&](double bytes) {
        return std::max(have_copy ? bytes / (copy_gbps * 1e9) : 0.0,
                        have_gemm ? run_flops(st, spec) / (gemm_tflops * 1e12) : 0.0);
      };
      const double roof_s = roofline(wb + kb);
      // The same with shared blocks read once a step: the bound for sharing (issue 13 §5).
      const double roof_once_s = roofline(wb + kv_bytes(st, spec, kv_elem, true));
      const double step_ms = 1e3 * t / double(std::max<int64_t>(1, n_steps));
      const DeviceInfo d = be.device_info();
      const double kv_util = double(st.kv_peak_blocks) / double(std::max(1, st.kv_blocks));
      // --profile: the decode steps' attention and rest of the step, from a profiled run of the
      // same jobs with one frame (eager launches: each kernel's own time).
      Profile prof;
      if (a.profile)
        prof = profile_run(
            be, [&] { run_synthetic(be, spec, opt, a.num_jobs, group, a.context_frames, 1); });
      const bool split = prof.decode_rest_ms > 0;
      std::fprintf(
          tab,
          "%8d %8d %12.0f %10.2f %10.1f %8s %8s %8s %9s %8.2f %8s %8s %8s %8.1f%% %8lld "
          "%8lld\n",
          a.num_jobs, group, tokens_per_s(st), frames_per_s(st),
          double(st.scheduler.seq_steps) / double(std::max<int64_t>(1, st.scheduler.steps)),
          rate(wb / t / 1e9).c_str(), rate(kb / t / 1e9).c_str(), rate(tf).c_str(),
          roof_s > 0 ? fixed(100 * roof_s / t, 1, "%").c_str() : "n/a", step_ms,
          timed ? fixed(gpu_ms, 2, "").c_str() : "-",
          split ? fixed(prof.decode_attention_ms, 2, "").c_str() : "-",
          split ? fixed(prof.decode_rest_ms, 2, "").c_str() : "-", 100 * kv_util,
          (long long)st.scheduler.shared_blocks, (long long)st.scheduler.preemptions);
      if (timed)
        std::fprintf(tab,
                     "         decode steps replayed from graphs (%lld of %lld): %.2f ms on the "
                     "device, %.2f ms staging on the host (%s), %.2f ms a "
                     "step outside the steps (engine)\n",
                     (long long)timing.steps, (long long)st.decode_steps, gpu_ms, step_host_ms,
                     opt.pipeline ? "while the step before runs" : "then waits: --no-overlap",
                     engine_host_ms);
      // Where the run's steps went: the prompts enter in prefill and mixed steps (a prompt chunk
      // beside the decoding sequences, at most --max-batch-slots slots a step).
      std::fprintf(tab,
                   "         steps: %lld decode (%.2f s), %lld mixed (%.2f s), %lld prefill "
                   "(%.2f s)\n",
                   (long long)st.decode_steps, st.decode_s, (long long)st.mixed_steps, st.mixed_s,
                   (long long)st.prefill_steps, st.prefill_s);
      if (timing.captures > 0)
        std::fprintf(tab,
                     "         step graphs captured during the run: %lld, %.3f s on the host "
                     "(partly behind the device running each one's first step)\n",
                     (long long)timing.captures, timing.capture_s);
      if (a.profile) print_profile(tab, prof);
      out["throughput"].push_back(
          {{"jobs", a.num_jobs},
           {"shared_group", group},
           {"tokens_per_s", tokens_per_s(st)},
           {"frames_per_s", frames_per_s(st)},
           {"wall_s", st.wall_s},
           {"prefill_s", st.prefill_s},
           {"decode_s", st.decode_s},
           {"mixed_s", st.mixed_s},
           {"prefill_steps", st.prefill_steps},
           {"decode_steps", st.decode_steps},
           {"mixed_steps", st.mixed_steps},
           {"mean_slots",
            double(st.scheduler.slots) / double(std::max<int64_t>(1, st.scheduler.steps))},
           {"mean_seqs",
            double(st.scheduler.seq_steps) / double(std::max<int64_t>(1, st.scheduler.steps))},
           {"max_seqs", st.scheduler.max_batch},
           {"max_slots", st.scheduler.max_slots},
           {"achieved_gbps", gb},
           {"weight_gbps", wb / t / 1e9},
           {"kv_gbps", kb / t / 1e9},
           {"roofline_s", roof_s > 0 ? json(roof_s) : no_value},
           {"roofline_shared_once_s", roof_once_s > 0 ? json(roof_once_s) : no_value},
           {"pct_roofline", roof_s > 0 ? json(100 * roof_s / t) : no_value},
           {"mean_step_ms", step_ms},
           {"achieved_tflops", tf},
           {"kv_blocks", st.kv_blocks},
           {"block_size", st.block_size},
           {"kv_peak_blocks", st.kv_peak_blocks},
           {"kv_utilisation", kv_util},
           {"prompt_blocks", st.scheduler.prompt_blocks},
           {"shared_blocks", st.scheduler.shared_blocks},
           {"prefill_slots_saved", st.scheduler.prefill_saved},
           {"preemptions", st.scheduler.preemptions},
           {"recomputed_slots", st.scheduler.recomputed},
           {"peak_gpu_bytes", d.peak_bytes},
           {"kv_bytes", d.kv_bytes},
           {"decode_attention_ms", split ? json(prof.decode_attention_ms) : no_value},
           {"decode_rest_ms", split ? json(prof.decode_rest_ms) : no_value},
           {"decode_gpu_ms", timed ? json(gpu_ms) : no_value},
           {"decode_graph_steps", timing.steps},
           {"graph_captures", timing.captures},
           {"graph_capture_s", timing.capture_s},
           {"decode_step_host_ms", timed ? json(step_host_ms) : no_value},
           {"overlap", opt.pipeline},
           {"engine_host_ms", engine_host_ms},
           {"kernels", prof.kernels}});
      tps_of.push_back(tokens_per_s(st));
      roof_of.push_back(group > 0 ? roof_once_s : roof_s);
    }
    // Sharing saves the group's repeated prompt prefill and, read once a step, its repeated KV
    // reads of the shared blocks: the roofline ratio (unshared against shared-read-once) is what
    // that is worth at most for this workload, beside the measured one.
    if (groups.size() == 2) {
      const double measured = tps_of[1] / tps_of[0];
      const bool roof = roof_of[0] > 0 && roof_of[1] > 0;
      std::fprintf(tab,
                   "groups of %d sharing context: %.3fx unshared tokens/s (roofline %s, shared "
                   "blocks read once a step)\n",
                   groups[1], measured,
                   roof ? fixed(roof_of[0] / roof_of[1], 3, "x").c_str() : "n/a");
      out["shared_vs_unshared"] = {{"group", groups[1]},
                                   {"measured", measured},
                                   {"roofline", roof ? json(roof_of[0] / roof_of[1]) : no_value}};
    }
  }
  if (json_stdout) {
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
  } else if (!a.json_out.empty()) {
    create_parent_dirs("--json", a.json_out, false);
    write_file_atomic(a.json_out, out.dump(2) + "\n");  // whole or not at all
  }
  return kExitOk;
}

}  // namespace loom
