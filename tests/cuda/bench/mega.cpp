// cuda_bench --megakernel: the decode-step megakernel (issue 15) against the graph path on a
// Terra-size model with random weights, at batch 1 (contexts 600 and 7,000) and batch 8: the
// median step time through Backend::step and the device time of a graph replay, each path in
// turn on the same backend; then where a megakernel step's time goes (MegakernelDebug::trace:
// per op, the mean time a CTA works on its units and waits for their inputs).
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "backend/cuda/cuda_backend.h"
#include "bench/bench.h"
#include "tests/tiny_spec.h"

namespace loom::bench {
namespace {

using json = nlohmann::json;

// The benchmark sampler's decode batch (temperature 1, no filter) on blocks of block_size.
StepBatch bench_batch(int n, int ctx, int block_size) {
  return decode_batch(n, ctx, block_size, 1.0f, 0, 1.0f);
}

}  // namespace

void bench_megakernel(Backend& be, double bw, json& r) {
  ModelSpec spec = test::terra_spec();
  spec.positions = PositionKind::None;
  cuda_load_random_weights(be, spec, 3);
  CacheRequest cr;
  const int bs = be.default_block_size();  // what `loom run` uses on cuda
  cr.block_size = bs;
  cr.num_blocks = 8 * ((7000 + bs) / bs + 1);
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
  // Batch 8 at 7,000 keys too: its attention walks its partitions one round trip at a time
  // (bench/NOTES-cuda.md session 62: 2,948 us a step against 1,711 at 600).
  for (auto [n, ctx] : std::vector<std::pair<int, int>>{{1, 600}, {1, 7000}, {8, 600}, {8, 7000}}) {
    const StepBatch b = bench_batch(n, ctx, bs);
    for (bool mega : {false, true}) {
      be.set_megakernel(mega);
      const int64_t m0 = be.megakernel_steps();
      const double st = time_steps(be, b, 5, 40);
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

  // Sweeps of a MegakernelDebug knob (batch 1, ctx 600 unless named): graph replay µs a value.
  be.set_megakernel(true);
  // LOOM_BENCH_MEGA_SWEEPS=a,b: only those sweeps and one traced configuration (batch 1, ctx
  // 600), for a short device call.
  const char* only = std::getenv("LOOM_BENCH_MEGA_SWEEPS");
  const std::string chosen = only != nullptr ? "," + std::string(only) + "," : "";
  auto sweep = [&](const char* key, const char* what, std::vector<int> values,
                   int MegakernelDebug::*knob, int ctx = 600, int batch = 1) {
    if (only != nullptr && chosen.find("," + std::string(key) + ",") == std::string::npos) return;
    json rows = json::array();
    std::printf("\n%s (batch %d, ctx %d):\n", what, batch, ctx);
    for (int v : values) {
      MegakernelDebug dbg;
      dbg.*knob = v;
      cuda_set_megakernel_debug(be, dbg);
      time_steps(be, bench_batch(batch, ctx, bs), 5, 20);
      const double gpu = cuda_time_graph_replay(be, batch, 50) * 1e-3;
      rows.push_back({{key, v}, {"graph_gpu_s", gpu}});
      std::printf("  %3d: graph %.1f us = %.3f x floor\n", v, gpu * 1e6, gpu * 1e6 / floor_us);
    }
    cuda_set_megakernel_debug(be, MegakernelDebug{});
    r[std::string(key) + "_sweep" + (ctx == 600 ? "" : "_ctx" + std::to_string(ctx))] = rows;
  };
  // Each unit ends with a CTA barrier and a release; the ring's copies started before a wait
  // queue the input's L2 reads behind them.
  sweep("rows_per_tile", "layer GEMV rows a unit", {16, 32, 64}, &MegakernelDebug::rows_per_tile);
  sweep("skip_math",
        "wrong tokens: 1 GEMV rows without their dot products, 2 waits that return at once, 3 both",
        {0, 1, 2, 3}, &MegakernelDebug::skip_math);
  // The dynamic buffer past its 128-byte boundary: 16 is where the static MegaShared (4,880
  // bytes) left it before session 57 (76 us a step slower than 0 on an H100), 64 half a line
  // (44 us slower in session 57's call 4).
  sweep("smem_skew", "bytes the dynamic layout starts past a 128-byte boundary", {0, 16, 64, 0},
        &MegakernelDebug::smem_skew);
  sweep("attn_apart", "attention beside the ring, its K/V staged early (1 off, 2 on)", {1, 2},
        &MegakernelDebug::attn_apart);
  // Off / on knobs alternated twice in one binary (1 off, 2 on), as named rows.
  struct Row {
    const char* key;
    int ctx, batch;
  };
  for (const Row& w : {Row{"attn_apart_ab", 600, 1}, Row{"attn_apart_7000", 7000, 1},
                       Row{"attn_apart_b2", 600, 2}, Row{"attn_apart_b2_7000", 7000, 2}})
    sweep(w.key, "attention beside the ring (1 off, 2 on), alternated", {1, 2, 1, 2},
          &MegakernelDebug::attn_apart, w.ctx, w.batch);
  for (const Row& w : {Row{"weights_evict", 600, 1}, Row{"weights_evict_7000", 7000, 1},
                       Row{"weights_evict_b8", 600, 8}})
    sweep(w.key, "the weights' copies L2 evict_first (1 off, 2 on)", {1, 2, 1, 2},
          &MegakernelDebug::weights_evict, w.ctx, w.batch);
  for (const Row& w : {Row{"gemv_early_down", 600, 1}, Row{"gemv_early_down_7000", 7000, 1}})
    sweep(w.key, "Down's weight segments a warp has in flight while it waits, alternated",
          {1, 2, 1, 2}, &MegakernelDebug::gemv_early_down, w.ctx, w.batch);
  sweep("gemv_ahead", "the weight ring runs on into the next GEMVs (1 off, 2 on)", {1, 2},
        &MegakernelDebug::gemv_ahead);
  sweep("gemv_ahead_b8", "the ring on into the next GEMVs (1 off, 2 on)", {1, 2},
        &MegakernelDebug::gemv_ahead, 600, 8);
  sweep("gemv_inflight", "weight segments a warp keeps in flight once staged", {1, 2, 3},
        &MegakernelDebug::gemv_inflight);
  sweep("gemv_early", "weight segments a warp has in flight while it waits", {1, 2, 3},
        &MegakernelDebug::gemv_early);
  // Batch 8's ring has 2 slots (shared memory): its in-flight knobs at 1 and 2.
  sweep("gemv_inflight_b8", "segments in flight once staged", {1, 2},
        &MegakernelDebug::gemv_inflight, 600, 8);
  sweep("gemv_early_b8", "segments in flight while it waits", {1, 2}, &MegakernelDebug::gemv_early,
        600, 8);
  for (int ctx : {600, 3000, 7000})
    sweep("attn_splits", "attention splits a (slot, KV head)", {8, 16, 24, 32},
          &MegakernelDebug::attn_splits, ctx);
  // Batch 8: the GEMVs on the tensor cores or the dot loop, and what the dot products cost.
  sweep("gemv_mma_b8", "GEMVs on the tensor cores (1 off, 2 on)", {1, 2},
        &MegakernelDebug::gemv_mma, 600, 8);
  sweep("skip_math_b8", "wrong tokens: skip_math as above", {0, 1, 2, 3},
        &MegakernelDebug::skip_math, 600, 8);
  // Batch 8's attention: 32 (slot, KV head) pairs over 4 splits by default, so 3 busy 256-key
  // partitions each at ctx 600; more splits make more, shorter units (session 59: slower).
  sweep("attn_min_keys_b8", "an attention partition's keys, at least", {64, 128, 256},
        &MegakernelDebug::attn_min_keys, 600, 8);
  for (int ctx : {600, 3000, 7000})
    sweep("attn_splits_b8", "attention splits a (slot, KV head)", {4, 8, 16, 32},
          &MegakernelDebug::attn_splits, ctx, 8);
  for (int ctx : {600, 3000})
    sweep("attn_min_keys", "an attention partition's keys, at least", {32, 64, 256},
          &MegakernelDebug::attn_min_keys, ctx);

  // Where a megakernel step goes.
  json phases = json::array();
  // The last row: batch 1 with neither dot products nor waits (skip_math 3), the streaming's
  // own costs per op.
  // (batch, ctx, skip_math, then gemv_early, gemv_inflight, attn_apart: 0 the backend's)
  std::vector<std::array<int, 6>> traced = {{1, 600, 0}, {1, 7000, 0}, {8, 600, 0}, {1, 600, 3}};
  if (only != nullptr) traced.resize(1);
  // LOOM_BENCH_MEGA_TRACE="batch,ctx,skip_math[,gemv_early,gemv_inflight,attn_apart];…": these
  // configurations instead.
  if (const char* t = std::getenv("LOOM_BENCH_MEGA_TRACE")) {
    traced.clear();
    std::istringstream in(t);
    std::string item;
    while (std::getline(in, item, ';')) {
      std::array<int, 6> v{};
      LOOM_CHECK(std::sscanf(item.c_str(), "%d,%d,%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3], &v[4],
                             &v[5]) >= 3,
                 "LOOM_BENCH_MEGA_TRACE: ", item,
                 " (expected batch,ctx,skip_math[,gemv_early,gemv_inflight,attn_apart])");
      traced.push_back(v);
    }
  }
  for (const std::array<int, 6>& tr : traced) {
    const int n = tr[0], ctx = tr[1];
    be.set_megakernel(true);
    MegakernelDebug dbg;
    dbg.trace = true;
    dbg.skip_math = tr[2];
    dbg.gemv_early = tr[3];
    dbg.gemv_inflight = tr[4];
    dbg.attn_apart = tr[5];
    cuda_set_megakernel_debug(be, dbg);
    time_steps(be, bench_batch(n, ctx, bs), 3, 20);
    const MegakernelTrace t = cuda_megakernel_trace(be);
    cuda_set_megakernel_debug(be, MegakernelDebug{});
    std::printf(
        "\nmegakernel batch %d ctx %d%s: %lld traced steps, %.1f us a step (first start to "
        "last end); per op, mean us a CTA works / waits (staging), then along the chain a "
        "layer's span and lag (last input unit to the first CTA staged), the busiest CTA's us on "
        "a layer's units of the op, the CTA with the longest program's us on the op:\n",
        n, ctx, tr[2] ? " (no math, no waits)" : "", (long long)t.steps, t.step_us);
    json row = {{"batch", n},
                {"ctx", ctx},
                {"skip_math", tr[2]},
                {"gemv_early", tr[3]},
                {"gemv_inflight", tr[4]},
                {"attn_apart", tr[5]},
                {"steps", t.steps},
                {"step_us", t.step_us},
                {"cta_mean_us", t.cta_mean_us},
                {"cta_max_us", t.cta_max_us}};
    std::printf("  a CTA's program less its waits: mean %.1f us, longest %.1f us\n", t.cta_mean_us,
                t.cta_max_us);
    for (const MegakernelPhase& p : t.phases) {
      std::printf(
          "  %-13s %8.1f %8.1f   (staging %5.1f)   span %6.2f lag %6.2f   busiest %6.2f   "
          "slowest CTA %6.1f\n",
          p.op.c_str(), p.busy_us, p.wait_us, p.stage_us, p.span_us, p.lag_us, p.busiest_us,
          p.slowest_us);
      row["ops"][p.op] = {{"busy_us", p.busy_us},
                          {"wait_us", p.wait_us},
                          {"stage_us", p.stage_us},
                          {"span_us", p.span_us},
                          {"lag_us", p.lag_us},
                          {"busiest_cta_layer_us", p.busiest_us},
                          {"slowest_cta_busy_us", p.slowest_us}};
    }
    // The raw timeline of ctx 600's last traced step (batch 1 or 8): [cta, op, layer, start,
    // wait, staged, end] (µs; staged −1 where not a GEMV), for scripts/mega_timeline.py.
    if ((n == 1 || n == 8) && ctx == 600) {
      json tl = json::array();
      for (const MegakernelTrace::Row& e : t.last_step)
        tl.push_back({e.cta, e.op, e.layer, std::round(e.start_us * 1e3) / 1e3,
                      std::round(e.wait_us * 1e3) / 1e3, std::round(e.staged_us * 1e3) / 1e3,
                      std::round(e.end_us * 1e3) / 1e3});
      row["timeline"] = tl;
    }
    phases.push_back(row);
  }
  r["trace"] = phases;
}

}  // namespace loom::bench
