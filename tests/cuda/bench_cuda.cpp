// cuda_bench: the CUDA backend's measurements on a Terra-size model (random bf16 weights of
// Terra's exact shapes, no checkpoint needed), written as JSON (argv[1]) and a table:
//   - device-to-device copy bandwidth (bytes read + written), the ceiling of every ratio;
//   - weight-streaming GEMV vs cuBLAS for the decode shapes [m, 2048] x [n, k]ᵀ (GB/s of weights),
//     and the "88-GEMV chain" (a step's GEMVs alone in one graph) against the copy-bandwidth floor;
//   - load(): 4.1 GB of host bf16 tensors to the device (seconds);
//   - decode step time through Backend::step() at batch 1 (contexts 600, 7000, 14000) and batch
//     64 / 256, s/frame = 576 x step, against the floor 576 x streamed weight bytes / copy bw;
//   - per-kernel-family times (profiling pass) for the same configurations;
//   - attention microbenchmarks, tensor-core vs CUDA-core (bench_attention.cpp);
//   - a 3-frame prefill (1746 slots) and the cost of top-k / top-p draws at batch 1;
//   - linear_fixed (the batch-invariant linear layer) vs cuBLAS on the same shapes, m 1 to 1746,
//     and from m = 32 each of its kernels forced ("linear_fixed paths": the data behind its
//     choice by shape, pick_path in kernels/linear_fixed.cu).
// `cuda_bench OUT.json --attention-case B CTX [KV [fp8]]` times one decode attention case alone
// (for ncu; KV kv heads of 8 q heads, default Terra's 4; fp8: an e4m3 cache).
// `cuda_bench OUT.json --batch-invariant` runs the backend measurements in batch-invariant mode
// (compare its decode and prefill rows with a default run: the cost of --batch-invariant).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm.h"
#include "bench_attention.h"
#include "kernels/activation.cuh"
#include "kernels/attention.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/gemv.cuh"
#include "kernels/linear_fixed.cuh"
#include "kernels/rope.cuh"
#include "kernels/sampling.cuh"

using namespace loom;
using json = nlohmann::json;

namespace {

ModelSpec terra_spec() {
  ModelSpec s;
  s.architecture = "LlamaActionForCausalLM";
  s.hidden = 2048;
  s.layers = 22;
  s.heads = 32;
  s.kv_heads = 4;
  s.head_dim = 64;
  s.intermediate = 5632;
  s.vocab = 262145;
  s.rms_eps = 1e-6f;
  s.rope_theta = 10000.0f;
  s.max_positions = 14550;
  s.image_tokens = 576;
  s.action_tokens = 6;
  s.action_dim = 3;
  s.spatial_rows = 582;
  s.temporal_rows = 25;
  s.action_projection = ActionProjection::Linear;
  return s;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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

// One decode batch: n sequences, each with `ctx` cached slots, one new token.
StepBatch decode_batch(int n, int ctx, int block_size, float temperature, int top_k, float top_p) {
  StepBatch b;
  const int per_seq = (ctx + 1 + block_size - 1) / block_size;
  b.blocks_per_seq = per_seq;
  for (int s = 0; s < n; s++) {
    b.slot_start.push_back(s);
    b.tokens.push_back((s * 7919 + 13) % 262144);
    b.positions.push_back(ctx);
    b.kv_len.push_back(ctx);
    for (int j = 0; j < per_seq; j++) b.block_tables.push_back(s * per_seq + j);
    b.sample.push_back(1);
    b.sampling.push_back(SamplingParams{temperature, top_k, top_p, uint64_t(s)});
    b.sample_index.push_back(0);
    b.draw_index.push_back(0);
  }
  b.slot_start.push_back(n);
  return b;
}

// Median seconds of `iters` steps after `warm` warm-up steps (the draw index moves on).
double time_steps(Backend& be, StepBatch b, int warm, int iters) {
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

// GEMV (ours) vs cuBLAS on [m, k] x [n, k]ᵀ bf16, weights rotated over > 256 MB so L2 does not
// hold them. GB/s of weight bytes: ours, cuBLAS, ours with programmatic dependent launch (the
// next GEMV streams its weights while the previous one finishes, as in the decode graph).
struct GemvRates {
  double ours, cublas, ours_pdl;
};
GemvRates gemv_vs_cublas(gpu::Gemm& gemm, cudaStream_t stream, int sms, int m, int n, int k) {
  const size_t wbytes = size_t(n) * k * 2;
  const int copies = int(std::max<size_t>(1, (size_t(512) << 20) / wbytes));
  void* w = nullptr;
  void *x = nullptr, *y = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&w, wbytes * copies));
  LOOM_CUDA_CHECK(cudaMalloc(&x, size_t(m) * k * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&y, size_t(m) * n * 4));
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, w, wbytes / 2 * copies, 3, 0.05f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, x, size_t(m) * k, 4, 1.0f, nullptr));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());  // the bench stream does not wait for stream 0
  cudaEvent_t e0, e1;
  LOOM_CUDA_CHECK(cudaEventCreate(&e0));
  LOOM_CUDA_CHECK(cudaEventCreate(&e1));
  auto bench = [&](bool ours, bool pdl) {
    const int iters = std::max(20, copies * 4);
    for (int pass = 0; pass < 2; pass++) {  // pass 0 warms up
      LOOM_CUDA_CHECK(cudaEventRecord(e0, stream));
      for (int i = 0; i < iters; i++) {
        const void* wi = static_cast<char*>(w) + wbytes * size_t(i % copies);
        if (ours) {
          gpu::GemvArgs g;
          g.w = wi;
          g.n = n;
          g.k = k;
          g.m = m;
          g.x = x;
          g.y = y;
          g.pdl = pdl;
          LOOM_KERNEL(gpu::gemv_bf16(g, sms, stream));
        } else {
          gemm.run(DType::BF16, x, wi, DType::BF16, y, m, n, k);  // gemm's stream: `stream`
        }
      }
      LOOM_CUDA_CHECK(cudaEventRecord(e1, stream));
      LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
      if (pass == 1) {
        float ms = 0;
        LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        return double(wbytes) * iters / (ms * 1e-3) / 1e9;
      }
    }
    return 0.0;
  };
  const double ours = bench(true, false), cublas = bench(false, false), pdl = bench(true, true);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(w);
  cudaFree(x);
  cudaFree(y);
  return {ours, cublas, pdl};
}

// linear_fixed vs cuBLAS on [m, k] x [n, k]ᵀ bf16 → bf16, weights rotated over > 256 MB as
// above: microseconds per call, GB/s of weight bytes and TFLOP/s of each.
json linear_fixed_vs_cublas(gpu::Gemm& gemm, cudaStream_t stream, int m, int n, int k) {
  const size_t wbytes = size_t(n) * k * 2;
  const int copies = int(std::max<size_t>(1, (size_t(512) << 20) / wbytes));
  void *w = nullptr, *x = nullptr, *y = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&w, wbytes * copies));
  LOOM_CUDA_CHECK(cudaMalloc(&x, size_t(m) * k * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&y, size_t(m) * n * 2));
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, w, wbytes / 2 * copies, 3, 0.05f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, x, size_t(m) * k, 4, 1.0f, nullptr));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  LOOM_CUDA_CHECK(cudaEventCreate(&e0));
  LOOM_CUDA_CHECK(cudaEventCreate(&e1));
  // path: a LinearFixedArgs::path, or -1 for cuBLAS.
  auto bench = [&](int path) {
    const bool ours = path >= 0;
    const int iters = std::max(10, std::min(copies * 4, 200));
    double us = 0;
    for (int pass = 0; pass < 2; pass++) {  // pass 0 warms up
      LOOM_CUDA_CHECK(cudaEventRecord(e0, stream));
      for (int i = 0; i < iters; i++) {
        const void* wi = static_cast<char*>(w) + wbytes * size_t(i % copies);
        if (ours) {
          gpu::LinearFixedArgs a;
          a.x = x;
          a.w = wi;
          a.y = y;
          a.m = m;
          a.n = n;
          a.k = k;
          a.path = path;
          LOOM_KERNEL(gpu::linear_fixed(a, stream));
        } else {
          gemm.run(DType::BF16, x, wi, DType::BF16, y, m, n, k);
        }
      }
      LOOM_CUDA_CHECK(cudaEventRecord(e1, stream));
      LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      us = 1e3 * ms / iters;
    }
    return us;
  };
  const double ours = bench(gpu::kPathAuto), cublas = bench(-1);
  // Each kernel forced (m ≥ 32), to tune linear_fixed's choice by shape.
  double rows = 0, tile64 = 0, tile128 = 0, tile192 = 0;
  if (m >= 32) {
    rows = bench(gpu::kPathRows);
    tile64 = bench(gpu::kPathTile64);
    tile128 = bench(gpu::kPathTile128);
    tile192 = bench(gpu::kPathTile192);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(w);
  cudaFree(x);
  cudaFree(y);
  const double flop = 2.0 * m * double(n) * k;
  return {{"m", m},
          {"n", n},
          {"k", k},
          {"fixed_us", ours},
          {"cublas_us", cublas},
          {"fixed_gbps", double(wbytes) / (ours * 1e-6) / 1e9},
          {"cublas_gbps", double(wbytes) / (cublas * 1e-6) / 1e9},
          {"fixed_tflops", flop / (ours * 1e-6) / 1e12},
          {"cublas_tflops", flop / (cublas * 1e-6) / 1e12},
          {"rows_us", rows},
          {"tile64_us", tile64},
          {"tile128_us", tile128},
          {"tile192_us", tile192}};
}

// Decode attention of one sequence at context ctx with Terra's heads (32 q, 4 kv, head_dim 64),
// bf16, 64 splits as the batch-1 graph uses: microseconds per call of rope_kv_write + attention
// (+ combine), and of attention alone; KV bytes over the attention time.
json attention_bench(cudaStream_t stream, int ctx) {
  const int H = 32, KV = 4, D = 64, bs = 16, blocks = (ctx + 1 + bs - 1) / bs;
  const size_t cache_elems = size_t(blocks) * bs * KV * D;
  void *qkv, *kc, *vc, *po, *pml, *out, *ints, *inv;
  LOOM_CUDA_CHECK(cudaMalloc(&qkv, (H + 2 * KV) * D * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&kc, cache_elems * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&vc, cache_elems * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&po, gpu::attention_partial_floats(KV * 128, D) * 4));
  LOOM_CUDA_CHECK(cudaMalloc(&pml, KV * 128 * gpu::kAttnRows * 2 * 4));
  LOOM_CUDA_CHECK(cudaMalloc(&out, H * D * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&inv, D / 2 * 4));
  std::vector<int32_t> h;  // block table, kv_len, slot_start, tiles, positions, cache_slot
  for (int b = 0; b < blocks; b++) h.push_back(b);
  const size_t o_kv = h.size();
  h.push_back(ctx);
  const size_t o_ss = h.size();
  h.insert(h.end(), {0, 1});
  const size_t o_tiles = h.size();
  h.insert(h.end(), {0, 0, 1});
  const size_t o_pos = h.size();
  h.push_back(ctx);
  const size_t o_cs = h.size();
  h.push_back(ctx);
  LOOM_CUDA_CHECK(cudaMalloc(&ints, h.size() * 4));
  LOOM_CUDA_CHECK(cudaMemcpy(ints, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, qkv, (H + 2 * KV) * D, 1, 1.0f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, kc, cache_elems, 2, 1.0f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, vc, cache_elems, 3, 1.0f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(DType::F32, inv, D / 2, 4, 0.5f, nullptr));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  const int32_t* I = static_cast<const int32_t*>(ints);
  gpu::RopeKvArgs r;
  r.qkv = qkv;
  r.positions = I + o_pos;
  r.cache_slot = I + o_cs;
  r.inv_freq = static_cast<const float*>(inv);
  r.n_slots = 1;
  r.heads = H;
  r.kv_heads = KV;
  r.head_dim = D;
  r.k_cache = kc;
  r.v_cache = vc;
  r.pdl = true;
  gpu::AttentionArgs a;
  a.qkv = qkv;
  a.k_cache = kc;
  a.v_cache = vc;
  a.block_tables = I;
  a.bt_stride = blocks;
  a.kv_len = I + o_kv;
  a.slot_start = I + o_ss;
  a.tiles = I + o_tiles;
  a.n_tiles = 1;
  a.heads = H;
  a.kv_heads = KV;
  a.head_dim = D;
  a.block_size = bs;
  a.num_splits = 128;  // what the batch-1 graph uses (4 x SMs / kv_heads, at most 128)
  a.partial_o = static_cast<float*>(po);
  a.partial_ml = static_cast<float*>(pml);
  a.out = out;
  a.decode = true;
  a.pdl = true;
  a.mma = false;  // the CUDA-core kernels (the tensor-core ones: bench_attention.cpp)
  cudaEvent_t e0, e1;
  LOOM_CUDA_CHECK(cudaEventCreate(&e0));
  LOOM_CUDA_CHECK(cudaEventCreate(&e1));
  auto timed = [&](bool with_rope) {
    const int iters = 200;
    float ms = 0;
    for (int pass = 0; pass < 2; pass++) {
      LOOM_CUDA_CHECK(cudaEventRecord(e0, stream));
      for (int i = 0; i < iters; i++) {
        if (with_rope) LOOM_KERNEL(gpu::rope_kv_write(r, stream));
        LOOM_KERNEL(gpu::paged_attention(a, stream));
      }
      LOOM_CUDA_CHECK(cudaEventRecord(e1, stream));
      LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
      LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    }
    return 1e3 * double(ms) / iters;
  };
  const double both = timed(true), attn = timed(false);
  a.fuse_rope = true;  // as the decode graph runs it: RoPE and the KV write inside attention
  a.positions = r.positions;
  a.cache_slot = r.cache_slot;
  a.inv_freq = r.inv_freq;
  const double fused = timed(false);
  const double kv_bytes = 2.0 * (ctx + 1) * KV * D * 2;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  for (void* p : {qkv, kc, vc, po, pml, out, ints, inv}) cudaFree(p);
  std::printf(
      "attention ctx %5d: rope+attention %.2f us, attention %.2f us (%.0f GB/s of KV), "
      "attention with rope fused %.2f us\n",
      ctx, both, attn, kv_bytes / (attn * 1e-6) / 1e9, fused);
  return {{"ctx", ctx},
          {"rope_attention_us", both},
          {"attention_us", attn},
          {"fused_rope_attention_us", fused},
          {"kv_gbps", kv_bytes / (attn * 1e-6) / 1e9}};
}

// The lm_head GEMV as the decode graph runs it (final RMSNorm fused into the input, fp32
// logits out, padded rows), and the device draw over 262,145 logits: microseconds each.
json lm_head_bench(cudaStream_t stream, int sms) {
  const int n = 262145, k = 2048, ld = (n + 63) / 64 * 64;
  void *w, *x, *nw, *y, *ws, *tok, *par;
  LOOM_CUDA_CHECK(cudaMalloc(&w, size_t(n) * k * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&x, k * 4));
  LOOM_CUDA_CHECK(cudaMalloc(&nw, k * 4));
  LOOM_CUDA_CHECK(cudaMalloc(&y, size_t(ld) * 4));
  LOOM_CUDA_CHECK(cudaMalloc(&ws, gpu::sample_workspace_bytes(1)));
  LOOM_CUDA_CHECK(cudaMalloc(&tok, 4));
  LOOM_CUDA_CHECK(cudaMalloc(&par, sizeof(gpu::SampleParamsDev)));
  gpu::SampleParamsDev p;
  p.temperature = 0.9f;
  p.active = 1;
  LOOM_CUDA_CHECK(cudaMemcpy(par, &p, sizeof(p), cudaMemcpyHostToDevice));
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, w, size_t(n) * k, 5, 0.05f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(DType::F32, x, k, 6, 1.0f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(DType::F32, nw, k, 7, 1.0f, nullptr));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  gpu::GemvArgs g;
  g.w = w;
  g.n = n;
  g.k = k;
  g.m = 1;
  g.in = gpu::GemvIn::RmsNorm;
  g.x = x;
  g.norm_w = static_cast<const float*>(nw);
  g.out = gpu::GemvOut::StoreF32;
  g.y = y;
  g.y_stride = ld;
  g.pdl = true;
  cudaEvent_t e0, e1;
  LOOM_CUDA_CHECK(cudaEventCreate(&e0));
  LOOM_CUDA_CHECK(cudaEventCreate(&e1));
  auto timed = [&](int what) {
    float ms = 0;
    for (int pass = 0; pass < 2; pass++) {
      LOOM_CUDA_CHECK(cudaEventRecord(e0, stream));
      for (int i = 0; i < 20; i++) {
        if (what == 0) LOOM_KERNEL(gpu::gemv_bf16(g, sms, stream));
        if (what == 1)
          LOOM_KERNEL(gpu::sample_tokens(static_cast<const float*>(y), 1, n, ld,
                                         static_cast<const gpu::SampleParamsDev*>(par), ws,
                                         static_cast<int32_t*>(tok), stream));
      }
      LOOM_CUDA_CHECK(cudaEventRecord(e1, stream));
      LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
      LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    }
    return 1e3 * double(ms) / 20;
  };
  const double head = timed(0), draw = timed(1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  for (void* q : {w, x, nw, y, ws, tok, par}) cudaFree(q);
  const double gb = double(n) * k * 2 / 1e9;
  std::printf("lm_head fused GEMV %.1f us (%.0f GB/s), device draw (T=0.9) %.1f us\n", head,
              gb / (head * 1e-6), draw);
  return {{"lm_head_us", head}, {"draw_us", draw}};
}

// The "88-GEMV chain": the batch-1 decode graph's GEMVs alone, in order (per layer qkv ←
// norm(x), x += o · q, gate_up ← norm(x), x += down · silu_mul(gate_up); x 22 layers; then
// lm_head ← norm(x), fp32 logits), each reading the previous output, captured in one CUDA graph
// with no attention in between. Its time against the weight bytes over the copy bandwidth is the
// GEMV schedule's distance from the floor; the variants show what each design choice is worth.
json gemv_chain_bench(cudaStream_t stream, int sms, double copy_gbps) {
  const int H = 2048, I = 5632, QKV = 2560, V = 262145, LD = 262208, layers = 22;
  const size_t layer_elems = size_t(QKV) * H + size_t(H) * H + size_t(2 * I) * H + size_t(H) * I;
  const size_t lm_elems = size_t(V) * H;
  void *w, *x, *qkv, *gu, *logits, *norm;
  LOOM_CUDA_CHECK(cudaMalloc(&w, (layer_elems * layers + lm_elems) * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&x, H * 4));
  LOOM_CUDA_CHECK(cudaMalloc(&qkv, QKV * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&gu, 2 * I * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&logits, size_t(LD) * 4));
  LOOM_CUDA_CHECK(cudaMalloc(&norm, H * 4));
  LOOM_KERNEL(
      gpu::fill_uniform(DType::BF16, w, layer_elems * layers + lm_elems, 21, 0.02f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(DType::F32, x, H, 22, 1.0f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(DType::F32, norm, H, 23, 1.0f, nullptr));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  const uint16_t* W = static_cast<const uint16_t*>(w);
  struct Variant {
    const char* name;
    bool pdl;
    bool lm_head;
  };
  const Variant variants[] = {
      {"default (backend): pdl", true, true},
      {"same, layers only (88 GEMVs, no lm_head)", true, false},
      {"no pdl", false, true},
  };
  const size_t layer_bytes = layer_elems * 2 * layers, lm_bytes = lm_elems * 2;
  std::printf(
      "\n88-GEMV chain (22 x [qkv 2560x2048, o 2048x2048, gate_up 11264x2048, down 2048x5632] + "
      "lm_head 262145x2048, m = 1, fused norms, one graph, no attention)\n"
      "weights %.3f GB (layers %.3f + lm_head %.3f); floor = bytes / copy bandwidth %.0f GB/s\n",
      (layer_bytes + lm_bytes) / 1e9, layer_bytes / 1e9, lm_bytes / 1e9, copy_gbps);
  std::printf("%-66s %9s %9s %8s\n", "variant", "ms", "GB/s", "x floor");
  json out = json::array();
  for (const Variant& v : variants) {
    auto run = [&](const void* wp, int n, int k, gpu::GemvIn in, const void* xin, int x_stride,
                   gpu::GemvOut o, void* y, int y_stride) {
      gpu::GemvArgs g;
      g.w = wp;
      g.n = n;
      g.k = k;
      g.m = 1;
      g.in = in;
      g.x = xin;
      g.x_stride = x_stride;
      g.norm_w = static_cast<const float*>(norm);
      g.out = o;
      g.y = y;
      g.y_stride = y_stride;
      g.pdl = v.pdl;
      LOOM_KERNEL(gpu::gemv_bf16(g, sms, stream));
    };
    auto chain = [&]() {
      for (int l = 0; l < layers; l++) {
        const uint16_t* L = W + layer_elems * l;
        const uint16_t *wq = L, *wo = wq + size_t(QKV) * H, *wgu = wo + size_t(H) * H,
                       *wd = wgu + size_t(2 * I) * H;
        run(wq, QKV, H, gpu::GemvIn::RmsNorm, x, H, gpu::GemvOut::Store, qkv, 0);
        run(wo, H, H, gpu::GemvIn::Plain, qkv, QKV, gpu::GemvOut::AddF32, x, 0);
        run(wgu, 2 * I, H, gpu::GemvIn::RmsNorm, x, H, gpu::GemvOut::Store, gu, 0);
        run(wd, H, I, gpu::GemvIn::SiluMul, gu, 0, gpu::GemvOut::AddF32, x, 0);
      }
      if (v.lm_head)
        run(W + layer_elems * layers, V, H, gpu::GemvIn::RmsNorm, x, H, gpu::GemvOut::StoreF32,
            logits, LD);
    };
    chain();  // eager once: sets the kernels' attributes outside the capture
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    chain();
    LOOM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    LOOM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t e0, e1;
    LOOM_CUDA_CHECK(cudaEventCreate(&e0));
    LOOM_CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<double> ms;
    for (int i = 0; i < 33; i++) {
      LOOM_CUDA_CHECK(cudaEventRecord(e0, stream));
      LOOM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      LOOM_CUDA_CHECK(cudaEventRecord(e1, stream));
      LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
      float t = 0;
      LOOM_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 3) ms.push_back(t);  // 3 warm-up replays
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    const double bytes = double(layer_bytes + (v.lm_head ? lm_bytes : 0));
    const double gbps = bytes / (med * 1e-3) / 1e9;
    const double floor_ms = bytes / (copy_gbps * 1e9) * 1e3;
    std::printf("%-66s %9.3f %9.0f %8.3f\n", v.name, med, gbps, med / floor_ms);
    out.push_back({{"variant", v.name},
                   {"pdl", v.pdl},
                   {"lm_head", v.lm_head},
                   {"ms", med},
                   {"min_ms", ms.front()},
                   {"gbps", gbps},
                   {"x_floor", med / floor_ms}});
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    LOOM_CUDA_CHECK(cudaGraphExecDestroy(exec));
    LOOM_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  std::printf(
      "(x floor = graph time / (bytes / copy bandwidth); issue #3 target: the whole step at "
      "<= 1.15; the default row is what the backend runs)\n");
  for (void* p : {w, x, qkv, gu, logits, norm}) cudaFree(p);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string reason;
  if (cuda_device_count(&reason) == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", reason.c_str());
    return 77;
  }
  const std::string out_path = argc > 1 ? argv[1] : "cuda_bench.json";
  const bool invariant = argc > 2 && std::string(argv[2]) == "--batch-invariant";
  if (argc > 4 && std::string(argv[2]) == "--attention-case") {
    // One decode attention case alone (e.g. under ncu): cuda_bench OUT --attention-case B CTX
    // [KV_HEADS]
    cudaStream_t stream;
    LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    int sms = 0;
    LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::ofstream(out_path) << attention_decode_case(stream, sms, std::atoi(argv[3]),
                                                     std::atoi(argv[4]),
                                                     argc > 5 ? std::atoi(argv[5]) : 4,
                                                     argc > 6 && std::string(argv[6]) == "fp8")
                                   .dump(2);
    return 0;
  }
  try {
    json r;
    const ModelSpec spec = terra_spec();
    auto be = make_cuda_backend(ComputeDType::BF16, 0, invariant);
    r["batch_invariant"] = invariant;
    r["device"] = be->device_info().name;
    const double bw = be->measure_copy_bandwidth_gbps();
    r["copy_gbps"] = bw;
    std::printf("device %s, copy bandwidth %.0f GB/s (read + write)\n",
                r["device"].get<std::string>().c_str(), bw);

    {  // GEMV vs cuBLAS
      cudaStream_t stream;
      LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      gpu::Gemm gemm;
      gemm.init(stream);
      int sms = 0;
      LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
      json g = json::array();
      std::printf("\n%-22s %3s %10s %10s %10s  (GB/s of weights; copy %.0f)\n", "shape", "m",
                  "gemv", "cublas", "gemv+pdl", bw);
      const std::vector<std::pair<int, int>> shapes = {
          {2560, 2048},   {2048, 2048},  {11264, 2048}, {2048, 5632},
          {262145, 2048}, {262208, 2048}};  // lm_head, and lm_head with its rows padded to 64 (the
                                            // backend's)
      for (auto [n, k] : shapes)
        for (int m : {1, 2, 4, 8}) {
          if (n == 262145 && m > 1 && m < 8) continue;
          if (n == 262208 && m < 4) continue;
          const GemvRates r = gemv_vs_cublas(gemm, stream, sms, m, n, k);
          g.push_back({{"n", n},
                       {"k", k},
                       {"m", m},
                       {"gemv_gbps", r.ours},
                       {"cublas_gbps", r.cublas},
                       {"gemv_pdl_gbps", r.ours_pdl}});
          std::printf("[%d,%d]x[%d,%d]T %3d %10.0f %10.0f %10.0f\n", m, k, n, k, m, r.ours,
                      r.cublas, r.ours_pdl);
        }
      r["gemv_vs_cublas"] = g;
      json lf = json::array();
      std::printf("\n%-22s %5s %10s %10s %9s %9s %8s %8s\n", "linear_fixed vs cuBLAS", "m",
                  "fixed us", "cublas us", "fix GB/s", "cub GB/s", "fix TF/s", "cub TF/s");
      for (auto [n, k] : std::vector<std::pair<int, int>>{
               {2560, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}, {262145, 2048}})
        for (int m : {1, 4, 8, 32, 64, 128, 256, 512, 1746}) {
          if (n == 262145 && m > 256) continue;  // lm_head: only the sampled rows
          const json e = linear_fixed_vs_cublas(gemm, stream, m, n, k);
          lf.push_back(e);
          std::printf("[%d,%d]x[%d,%d]T %5d %10.1f %10.1f %9.0f %9.0f %8.1f %8.1f\n", m, k, n, k, m,
                      e["fixed_us"].get<double>(), e["cublas_us"].get<double>(),
                      e["fixed_gbps"].get<double>(), e["cublas_gbps"].get<double>(),
                      e["fixed_tflops"].get<double>(), e["cublas_tflops"].get<double>());
        }
      r["linear_fixed_vs_cublas"] = lf;
      std::printf("\n%-22s %5s %10s %10s %10s %10s %10s  (us; same bits)\n", "linear_fixed paths",
                  "m", "auto", "rows", "tile64", "tile128", "tile192");
      for (const json& e : lf)
        if (e["m"].get<int>() >= 32)
          std::printf("[%d,%d]x[%d,%d]T %5d %10.1f %10.1f %10.1f %10.1f %10.1f\n",
                      e["m"].get<int>(), e["k"].get<int>(), e["n"].get<int>(), e["k"].get<int>(),
                      e["m"].get<int>(), e["fixed_us"].get<double>(), e["rows_us"].get<double>(),
                      e["tile64_us"].get<double>(), e["tile128_us"].get<double>(),
                      e["tile192_us"].get<double>());
      json at = json::array();
      for (int ctx : {600, 7000, 14000}) at.push_back(attention_bench(stream, ctx));
      r["attention_decode"] = at;
      r["attention_mma"] = attention_mma_bench(stream, sms);
      r["lm_head_and_draw"] = lm_head_bench(stream, sms);
      r["gemv_chain"] = gemv_chain_bench(stream, sms, bw);
    }

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
    cr.block_size = 16;
    cr.gpu_memory_fraction = 0.9;
    const int blocks = be->allocate_cache(cr);
    cuda_fill_cache_random(*be, 9);
    const DeviceInfo di = be->device_info();
    r["kv_blocks"] = blocks;
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
      const StepBatch b = decode_batch(n, ctx, 16, 0.9f, 0, 1.0f);
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
      const StepBatch b = decode_batch(1, ctx, 16, 0.9f, 0, 1.0f);
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
      const double st = time_steps(*be, decode_batch(1, 600, 16, 0.9f, k, p), 3, 20);
      draws.push_back({{"top_k", k}, {"top_p", p}, {"step_s", st}});
      std::printf("draw top_k %d top_p %.2f: step %.3f ms\n", k, p, st * 1e3);
    }
    r["draw_cost"] = draws;

    {  // 3-frame prefill (time to first token of a Terra job)
      StepBatch b;
      const int n = 3 * 582;
      b.blocks_per_seq = (n + 15) / 16;
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
    std::ofstream(out_path) << r.dump(2) << "\n";
    std::printf("\nwrote %s\n", out_path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
