// The CUDA backend end to end on a Terra-size model (random bf16 weights of Terra's exact
// shapes, no checkpoint needed): load() of 4.1 GB of host bf16 tensors; decode step time through
// Backend::step() at batch 1 (contexts 600, 7000, 14000) and batch 8 / 64 / 256, s/frame = 576 x
// step against the floor 576 x streamed weight bytes / copy bandwidth, with per-kernel-family
// times (profiling pass); the batch-1 graph with kernel families left out; the cost of top-k /
// top-p draws; a 3-frame prefill (1746 slots).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "bench.h"
#include "tests/tiny_spec.h"

namespace loom::bench {

using json = nlohmann::json;

namespace {

// Random bf16 host tensor, filled by several threads.
Tensor random_bf16(std::vector<int64_t> shape, uint64_t seed, float scale) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<uint8_t> bytes(size_t(n) * 2);
  auto* p = reinterpret_cast<uint16_t*>(bytes.data());
  const int threads = 8;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++)
    ts.emplace_back([=] {
      uint64_t x = seed * 0x9E3779B97F4A7C15ull + uint64_t(t) + 1;
      for (int64_t i = n * t / threads; i < n * (t + 1) / threads; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const float u = float(x >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
        p[i] = f32_to_bf16(u * scale);
      }
    });
  for (auto& t : ts) t.join();
  return Tensor::own_bytes(DType::BF16, std::move(shape), std::move(bytes));
}

Weights terra_weights(const ModelSpec& s) {
  Weights w;
  const int64_t H = s.hidden, V = s.vocab, I = s.intermediate;
  uint64_t seed = 1;
  w.embed = random_bf16({V, H}, seed++, 1.0f);
  w.lm_head = random_bf16({V, H}, seed++, 1.0f / std::sqrt(float(H)));
  w.final_norm = random_bf16({H}, seed++, 1.0f);
  w.pos_spatial = random_bf16({s.spatial_rows, H}, seed++, 0.1f);
  w.pos_temporal = random_bf16({s.temporal_rows, H}, seed++, 0.1f);
  for (int l = 0; l < s.layers; l++) {
    LayerWeights L;
    L.attn_norm = random_bf16({H}, seed++, 1.0f);
    L.mlp_norm = random_bf16({H}, seed++, 1.0f);
    L.qkv = random_bf16({s.q_dim() + 2 * s.kv_dim(), H}, seed++, 1.0f / std::sqrt(float(H)));
    L.o = random_bf16({H, s.q_dim()}, seed++, 1.0f / std::sqrt(float(H)));
    L.gate_up = random_bf16({2 * I, H}, seed++, 1.0f / std::sqrt(float(H)));
    L.down = random_bf16({H, I}, seed++, 1.0f / std::sqrt(float(I)));
    w.layers.push_back(L);
  }
  ActionLayer a;
  a.weight = random_bf16({H, s.action_dim}, seed++, 0.5f);
  a.bias = random_bf16({H}, seed++, 0.1f);
  w.action.push_back(a);
  return w;
}

json profile(Backend& be, const StepBatch& b, int iters) {
  be.set_profiling(true);
  StepOutput out;
  for (int i = 0; i < iters; i++) be.step(b, out);
  json j = json::array();
  for (const KernelTime& k : be.kernel_times())
    j.push_back({{"name", k.name},
                 {"ms_per_step", k.ms / iters},
                 {"calls_per_step", double(k.calls) / iters}});
  be.set_profiling(false);
  return j;
}

}  // namespace

void bench_backend(Backend& be_ref, double bw, json& r) {
  Backend* be = &be_ref;
  ModelSpec spec = test::terra_spec();
  spec.positions = PositionKind::None;  // this bench has always run without the position tables
  // load(): host bf16 tensors → device.
  double t0 = now_s();
  Weights w = terra_weights(spec);
  const double gen_s = now_s() - t0;
  be->load(spec, w);
  const double load_s = cuda_last_load_seconds(*be);
  size_t host_bytes = w.embed.nbytes() + w.lm_head.nbytes();
  for (const auto& L : w.layers)
    host_bytes += L.qkv.nbytes() + L.o.nbytes() + L.gate_up.nbytes() + L.down.nbytes();
  w = Weights{};
  r["load"] = {{"seconds", load_s}, {"bytes", host_bytes}, {"host_gen_seconds", gen_s}};
  std::printf("\nload: %.2f GB in %.2f s (%.1f GB/s)\n", host_bytes / 1e9, load_s,
              host_bytes / 1e9 / load_s);

  CacheRequest cr;
  const int bs = be->default_block_size();  // what `loom run` uses on cuda
  cr.block_size = bs;
  cr.gpu_memory_fraction = 0.9;
  const int blocks = be->allocate_cache(cr);
  cuda_fill_cache_random(*be, 9);
  const DeviceInfo di = be->device_info();
  r["kv_blocks"] = blocks;
  r["block_size"] = bs;
  r["weight_bytes"] = di.weight_bytes;
  // Weights a decode step streams: everything but the embedding table (Terra: lm_head untied).
  const double streamed = double(di.weight_bytes) - double(spec.vocab) * spec.hidden * 2;
  const double floor_step = streamed / (bw * 1e9);
  r["streamed_bytes"] = streamed;
  r["floor_step_s"] = floor_step;
  r["floor_s_per_frame"] = 576 * floor_step;
  std::printf("KV pool %d blocks; streamed %.3f GB/step; floor %.1f us/step = %.3f s/frame\n",
              blocks, streamed / 1e9, floor_step * 1e6, 576 * floor_step);

  json dec = json::array();
  std::printf("\n%-6s %-6s %12s %12s %10s\n", "batch", "ctx", "step_ms", "s/frame", "x floor");
  for (auto [n, ctx] : std::vector<std::pair<int, int>>{
           {1, 600}, {1, 7000}, {1, 14000}, {8, 600}, {64, 600}, {256, 600}}) {
    const StepBatch b = decode_batch(n, ctx, bs, 0.9f, 0, 1.0f);
    const double st = time_steps(*be, b, 5, n >= 64 ? 20 : 60);
    const double gpu = cuda_time_graph_replay(*be, n, n >= 64 ? 10 : 50) * 1e-3;
    const double spf = 576 * st;
    dec.push_back({{"batch", n},
                   {"ctx", ctx},
                   {"step_s", st},
                   {"s_per_frame", spf},
                   {"x_floor", st / floor_step},
                   {"tokens_per_s", n / st},
                   {"graph_gpu_s", gpu},
                   {"graph_x_floor", gpu / floor_step},
                   {"kernels", profile(*be, b, 5)}});
    std::printf("%-6d %-6d %12.3f %12.4f %10.3f   graph alone %.3f ms = %.3f x floor\n", n, ctx,
                st * 1e3, spf, st / floor_step, gpu * 1e3, gpu / floor_step);
  }
  r["decode"] = dec;

  // Where a batch-1 step's GPU time goes: the graph with kernel families left out.
  json parts = json::array();
  for (int ctx : {600, 14000}) {
    const StepBatch b = decode_batch(1, ctx, bs, 0.9f, 0, 1.0f);
    json row = {{"ctx", ctx}};
    for (int mask : {0, 1, 2, 4, 3, 7}) {
      cuda_set_debug_skip(*be, mask);
      time_steps(*be, b, 2, 2);
      const double ms = cuda_time_graph_replay(*be, 1, 30);
      row["skip_" + std::to_string(mask) + "_ms"] = ms;
      std::printf("ctx %5d graph without %-28s %.3f ms\n", ctx,
                  mask == 0   ? "nothing"
                  : mask == 1 ? "rope+attention"
                  : mask == 2 ? "layer GEMVs"
                  : mask == 4 ? "lm_head+sample"
                  : mask == 3 ? "rope+attention+GEMVs"
                              : "all but embed",
                  ms);
    }
    cuda_set_debug_skip(*be, 0);
    parts.push_back(row);
  }
  r["graph_decomposition"] = parts;

  // Draw cost: batch 1, ctx 600, with top-k / top-p on.
  json draws = json::array();
  for (auto [k, p] : std::vector<std::pair<int, float>>{{0, 1.0f}, {50, 1.0f}, {0, 0.9f}}) {
    const double st = time_steps(*be, decode_batch(1, 600, bs, 0.9f, k, p), 3, 20);
    draws.push_back({{"top_k", k}, {"top_p", p}, {"step_s", st}});
    std::printf("draw top_k %d top_p %.2f: step %.3f ms\n", k, p, st * 1e3);
  }
  r["draw_cost"] = draws;

  {  // 3-frame prefill (time to first token of a Terra job)
    StepBatch b;
    const int n = 3 * 582;
    b.blocks_per_seq = (n + bs - 1) / bs;
    b.slot_start = {0, n};
    for (int p = 0; p < n; p++) {
      const bool act = p % 582 >= 576;
      b.tokens.push_back(act ? kActionSlot : (p * 31) % 262144);
      b.positions.push_back(p);
      for (int d = 0; d < 3; d++) b.actions.push_back(act ? 0.5f * d : 0.0f);
    }
    b.kv_len = {0};
    for (int j = 0; j < b.blocks_per_seq; j++) b.block_tables.push_back(j);
    b.sample = {1};
    b.sampling = {SamplingParams{0.9f, 0, 1.0f, 0}};
    b.sample_index = {0};
    b.draw_index = {0};
    const double st = time_steps(*be, b, 2, 5);
    r["prefill_1746_s"] = st;
    r["prefill_kernels"] = profile(*be, b, 2);
    std::printf("prefill 1746 slots: %.1f ms\n", st * 1e3);
  }
}

// The decode batch d with its first k sequences given a frame's last image token and 6 action
// slots instead of their one token (positions ctx .. ctx + 6; d's block tables have room).
StepBatch action_batch(const StepBatch& d, int k, int action_dim) {
  constexpr int kActions = 6;
  StepBatch b = d;
  b.tokens.clear();
  b.positions.clear();
  b.slot_start = {0};
  for (int s = 0; s < d.n_seqs(); s++) {
    const int n = s < k ? 1 + kActions : 1;
    for (int j = 0; j < n; j++) {
      b.tokens.push_back(j == 0 ? d.tokens[size_t(s)] : kActionSlot);
      b.positions.push_back(d.positions[size_t(s)] + j);
      for (int c = 0; c < action_dim; c++) b.actions.push_back(j == 0 ? 0.0f : 0.1f * (c + 1));
    }
    b.slot_start.push_back(int(b.tokens.size()));
  }
  return b;
}

json bench_step_case(Backend& be, int batch, const std::vector<int>& ctxs, KvDType kv, bool scatter,
                     bool power) {
  ModelSpec spec = test::terra_spec();
  spec.positions = PositionKind::None;
  be.load(spec, terra_weights(spec));
  CacheRequest cr;
  cr.block_size = be.default_block_size();  // what `loom run` uses on cuda
  cr.gpu_memory_fraction = 0.9;
  cr.kv_dtype = kv;
  be.allocate_cache(cr);
  cuda_fill_cache_random(be, 9);
  // The families a mask leaves out (cuda_set_debug_skip's bits).
  const std::vector<std::pair<int, const char*>> masks = {
      {0, "nothing"},
      {1, "attention"},
      {2, "layer GEMMs"},
      {32, "qkv GEMM"},
      {64, "o GEMM"},
      {128, "gate_up GEMM"},
      {256, "down GEMM"},
      {4, "lm_head+draw"},
      {16, "draw"},
      {8, "norms+silu_mul"},
      {2 | 4 | 8, "all but attention"},
      {1024, "(attention w/o PDL)"},
      {1024 | 2 | 4 | 8, "(attn w/o PDL)"},
      {2048, "(no blocks cap)"},
      {2048 | 2 | 4 | 8, "(attn, no cap)"},
      {4096, "(split cap 1)"},
      {4096 | 2 | 4 | 8, "(attn, split cap 1)"},
      {8192, "(split no cap)"},
      {8192 | 2 | 4 | 8, "(attn, split no cap)"},
      {512, "(layer 0's KV)"},
      {512 | 2 | 4 | 8, "(attn, layer 0's KV)"},
      {1 | 2 | 4 | 8, "all but embed"}};
  json rows = json::array();
  for (int ctx : ctxs) {
    StepBatch b = decode_batch(batch, ctx, cr.block_size, 1.0f, 0, 1.0f);
    // scatter: block j of sequence s at j n + s, as decode steps that append a block to each of
    // n running sequences in turn leave them, instead of each sequence's blocks side by side.
    if (scatter)
      for (int s = 0; s < batch; s++)
        for (int j = 0; j < b.blocks_per_seq; j++)
          b.block_tables[size_t(s) * b.blocks_per_seq + j] = j * batch + s;
    json row = {{"batch", batch},
                {"ctx", ctx},
                {"kv", kv_dtype_name(kv)},
                {"block_size", cr.block_size},
                {"scatter", scatter}};
    double full = 0;
    for (auto [mask, what] : masks) {
      cuda_set_debug_skip(be, mask);
      time_steps(be, b, 2, 2);  // captures this mask's graph
      const double ms = cuda_time_graph_replay(be, batch, 20);
      if (mask == 0) full = ms;
      row["graph_ms_without"][what] = ms;
      std::printf("b%d ctx %5d %s: graph without %-20s %8.3f ms (%+.3f)\n", batch, ctx,
                  kv_dtype_name(kv), what, ms, ms - full);
    }
    cuda_set_debug_skip(be, 0);
    // power: a few of those graphs replayed for ~8 s each, the windows' wall-clock bounds in the
    // JSON, for nvidia-smi's power and clock samples (a 256-job run holds the 700 W cap); the
    // step without lm_head and the draw gives their joules a step under the cap.
    if (power)
      for (const char* what :
           {"nothing", "attention", "all but attention", "lm_head+draw", "nothing"}) {
        const auto m = std::find_if(masks.begin(), masks.end(),
                                    [&](const auto& e) { return std::string(e.second) == what; });
        cuda_set_debug_skip(be, m->first);
        time_steps(be, b, 2, 2);
        const double ms = row["graph_ms_without"][what].get<double>();
        const double t0 = wall_s();
        const double got = cuda_time_graph_replay(be, batch, int(8000 / ms));
        const double t1 = wall_s();
        row["power_windows"].push_back({{"without", what}, {"t0", t0}, {"t1", t1}, {"ms", got}});
        std::printf("power window without %-20s %.3f .. %.3f s (%.3f ms a replay)\n", what, t0, t1,
                    got);
      }
    cuda_set_debug_skip(be, 0);
    // Steps where k sequences feed a frame's 6 action slots after its last image token (7
    // slots, one-slot tiles: a chunk graph) against the plain decode step, whole steps timed.
    // 32768: every TMA decode pair whole past one wave of warps; 1024: RoPE and attention
    // without PDL.
    for (int mask : {0, 32768, 1024}) {
      cuda_set_debug_skip(be, mask);
      const std::string m = std::to_string(mask);
      const double plain = 1e3 * time_steps(be, b, 3, 20);
      row["step_ms"][m]["decode"] = plain;
      for (int k : {1, 2, 4}) {
        const double ms = 1e3 * time_steps(be, action_batch(b, k, spec.action_dim), 3, 20);
        row["step_ms"][m]["action_" + std::to_string(k)] = ms;
        std::printf(
            "b%d ctx %5d %s mask %5d: step with %d sequences on action slots %8.3f ms "
            "(%+.3f against decode)\n",
            batch, ctx, kv_dtype_name(kv), mask, k, ms, ms - plain);
      }
    }
    cuda_set_debug_skip(be, 0);
    row["kernels_eager"] = profile(be, b, 3);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace loom::bench
