// cuda_bench --megakernel: the decode-step megakernel (issue 15) against the graph path on a
// Terra-size model with random weights, at batch 1 (contexts 600 and 7,000) and batch 8: the
// median step time through Backend::step and the device time of a graph replay, each path in
// turn on the same backend; then where a megakernel step's time goes (MegakernelDebug::trace:
// per op, the mean time a CTA works on its units and waits for their inputs).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "backend/cuda/cuda_backend.h"
#include "bench/bench.h"
#include "tests/tiny_spec.h"

namespace loom::bench {
namespace {

using json = nlohmann::json;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

StepBatch decode_batch(int n, int ctx) {
  StepBatch b;
  const int per_seq = (ctx + 1 + 15) / 16;
  b.blocks_per_seq = per_seq;
  for (int s = 0; s < n; s++) {
    b.slot_start.push_back(s);
    b.tokens.push_back((s * 7919 + 13) % 262144);
    b.positions.push_back(ctx);
    b.kv_len.push_back(ctx);
    for (int j = 0; j < per_seq; j++) b.block_tables.push_back(s * per_seq + j);
    b.sample.push_back(1);
    b.sampling.push_back(SamplingParams{1.0f, 0, 1.0f, uint64_t(s)});  // the benchmark sampler
    b.sample_index.push_back(0);
    b.draw_index.push_back(0);
  }
  b.slot_start.push_back(n);
  return b;
}

double median_step_s(Backend& be, StepBatch b, int warm, int iters) {
  StepOutput out;
  std::vector<double> t;
  for (int i = 0; i < warm + iters; i++) {
    for (auto& d : b.draw_index) d++;
    const double t0 = now_s();
    be.step(b, out);
    if (i >= warm) t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

void bench_megakernel(Backend& be, double bw, json& r) {
  ModelSpec spec = test::terra_spec();
  spec.positions = PositionKind::None;
  cuda_load_random_weights(be, spec, 3);
  CacheRequest cr;
  cr.block_size = 16;
  cr.num_blocks = 8 * ((7000 + 16) / 16 + 1);
  be.allocate_cache(cr);
  cuda_fill_cache_random(be, 9);
  const double streamed =
      double(be.device_info().weight_bytes) - double(spec.vocab) * spec.hidden * 2;
  const double floor_us = streamed / (bw * 1e9) * 1e6;
  r["streamed_bytes"] = streamed;
  r["floor_step_us"] = floor_us;
  const std::string why = cuda_megakernel_refusal(be);
  std::printf("weights streamed a step %.3f GB, floor %.1f us at %.0f GB/s%s%s\n", streamed / 1e9,
              floor_us, bw, why.empty() ? "" : "; megakernel refused: ", why.c_str());
  std::printf("\n%-6s %-6s %-6s %10s %10s %10s %10s\n", "batch", "ctx", "path", "step us",
              "graph us", "x floor", "GB/s");
  json rows = json::array();
  for (auto [n, ctx] : std::vector<std::pair<int, int>>{{1, 600}, {1, 7000}, {8, 600}}) {
    const StepBatch b = decode_batch(n, ctx);
    for (bool mega : {false, true}) {
      be.set_megakernel(mega);
      const int64_t m0 = be.megakernel_steps();
      const double st = median_step_s(be, b, 5, 40);
      const bool took = be.megakernel_steps() > m0;
      const double gpu = cuda_time_graph_replay(be, n, 50) * 1e-3;
      rows.push_back({{"batch", n},
                      {"ctx", ctx},
                      {"megakernel", took},
                      {"step_s", st},
                      {"graph_gpu_s", gpu},
                      {"x_floor", gpu * 1e6 / floor_us},
                      {"weight_gbps", streamed / gpu / 1e9}});
      std::printf("%-6d %-6d %-6s %10.1f %10.1f %10.3f %10.0f\n", n, ctx, took ? "mega" : "graph",
                  st * 1e6, gpu * 1e6, gpu * 1e6 / floor_us, streamed / gpu / 1e9);
    }
  }
  r["steps"] = rows;

  // Rows of a layer GEMV unit (each unit ends with a CTA barrier and a release), batch 1.
  json tiles = json::array();
  std::printf("\nlayer GEMV rows a unit (batch 1, ctx 600):\n");
  be.set_megakernel(true);
  for (int rows : {16, 32, 64}) {
    MegakernelDebug dbg;
    dbg.rows_per_tile = rows;
    cuda_set_megakernel_debug(be, dbg);
    const double gpu =
        (median_step_s(be, decode_batch(1, 600), 5, 20), cuda_time_graph_replay(be, 1, 50) * 1e-3);
    tiles.push_back({{"rows_per_tile", rows}, {"graph_gpu_s", gpu}});
    std::printf("  %2d rows: graph %.1f us = %.3f x floor\n", rows, gpu * 1e6,
                gpu * 1e6 / floor_us);
  }
  cuda_set_megakernel_debug(be, MegakernelDebug{});
  r["rows_per_tile_sweep"] = tiles;

  // Weight segments a warp starts before an instruction's wait (the rest after its staging).
  json early = json::array();
  std::printf("\nweight segments a warp starts before the wait (batch 1, ctx 600):\n");
  for (int e : {1, 2, 3}) {
    MegakernelDebug dbg;
    dbg.gemv_early = e;
    cuda_set_megakernel_debug(be, dbg);
    const double gpu =
        (median_step_s(be, decode_batch(1, 600), 5, 20), cuda_time_graph_replay(be, 1, 50) * 1e-3);
    early.push_back({{"gemv_early", e}, {"graph_gpu_s", gpu}});
    std::printf("  %d: graph %.1f us = %.3f x floor\n", e, gpu * 1e6, gpu * 1e6 / floor_us);
  }
  cuda_set_megakernel_debug(be, MegakernelDebug{});
  r["gemv_early_sweep"] = early;

  // Where a megakernel step goes.
  json phases = json::array();
  for (auto [n, ctx] : std::vector<std::pair<int, int>>{{1, 600}, {1, 7000}, {8, 600}}) {
    be.set_megakernel(true);
    MegakernelDebug dbg;
    dbg.trace = true;
    cuda_set_megakernel_debug(be, dbg);
    median_step_s(be, decode_batch(n, ctx), 3, 20);
    const MegakernelTrace t = cuda_megakernel_trace(be);
    cuda_set_megakernel_debug(be, MegakernelDebug{});
    std::printf(
        "\nmegakernel batch %d ctx %d: %lld traced steps, %.1f us a step (first start to "
        "last end); per op, mean us a CTA works / waits:\n",
        n, ctx, (long long)t.steps, t.step_us);
    json row = {{"batch", n}, {"ctx", ctx}, {"steps", t.steps}, {"step_us", t.step_us}};
    for (const MegakernelPhase& p : t.phases) {
      std::printf("  %-13s %8.1f %8.1f   (staging %.1f)\n", p.op.c_str(), p.busy_us, p.wait_us,
                  p.stage_us);
      row["ops"][p.op] = {{"busy_us", p.busy_us}, {"wait_us", p.wait_us}, {"stage_us", p.stage_us}};
    }
    phases.push_back(row);
  }
  r["trace"] = phases;
}

}  // namespace loom::bench
