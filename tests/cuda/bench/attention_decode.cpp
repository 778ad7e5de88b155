// Decode attention on the CUDA cores (kernels/attention.cuh, kernels/rope.cuh) at Terra's
// contexts 600, 7000 and 14000: rope_kv_write + attention, attention alone, attention with RoPE
// fused. The attention family's benchmark, moved here unchanged when bench_cuda.cpp was split (the
// tensor-core kernels: bench_attention.cpp); its validation comes with that family's rework.
#include <cstdio>
#include <vector>

#include "bench.h"
#include "kernels/activation.cuh"
#include "kernels/attention.cuh"
#include "kernels/rope.cuh"

namespace loom::bench {

using json = nlohmann::json;

namespace {

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

}  // namespace

json bench_attention_decode(const Context& c) {
  json at = json::array();
  for (int ctx : {600, 7000, 14000}) at.push_back(attention_bench(c.stream, ctx));
  return at;
}

}  // namespace loom::bench

#include "bench_attention.h"

namespace loom::bench {

json bench_attention_mma(const Context& c) {
  return attention_mma_bench(c.stream, c.sms);
}

}  // namespace loom::bench
