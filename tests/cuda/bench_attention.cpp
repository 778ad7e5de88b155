// cuda_bench's attention entries (Terra heads: 32 q, 4 kv, head_dim 64, bf16, 16-slot blocks,
// block tables 910 wide as the decode graphs have them): the tensor-core kernels against the
// CUDA-core ones, L2 flushed before every call (in a decode step the layer's GEMVs stream
// 88 MB between two attention calls, so the KV is not in L2).
//   - decode: batch 1 at contexts 600, 7000, 14000; batch 64 and 256 at 600 and 8000:
//     microseconds per call (the split decode kernel, combining in its last block), GB/s of KV
//     read; the same with the combine kernel; the tensor-core prefill kernel on the same
//     one-slot tiles; the CUDA-core decode kernel.
//   - prefill: one 1746-slot chunk (3 Terra frames) from position 0: ms and TFLOP/s.
//   - the decode cases again over an FP8 (e4m3) cache: GB/s of the bytes actually read (half
//     of bf16's for the same context).
#include "bench_attention.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "backend/cuda/gemm.h"
#include "bench/bench.h"
#include "bench/nvml.h"
#include "kernels/activation.cuh"
#include "kernels/attention.cuh"
#include "kernels/cuda_check.cuh"

using json = nlohmann::json;

namespace loom {

namespace {

constexpr int kD = 64;
// KV slots a cache block; attention_decode_case may change it for one case.
int cache_bs = 16;
// Terra's heads; attention_decode_case may change the kv heads (8 q heads each) for one case.
int n_heads = 32, n_kv = 4;
bool kv_fp8 = false;  // the cases' caches hold e4m3 (scales 1)
// > 0: the sequences' blocks interleaved (block j of sequence s at (j n_seqs + s) x spread)
// over a pool of this many blocks, as a running batch leaves them, instead of each sequence's
// blocks side by side in a pool just large enough.
int scatter_pool = 0;
// > 1: sequences in groups of this many share the blocks of their first share_keys keys (the
// first of each group's blocks, as prefix sharing leaves them).
int share_group = 0, share_keys = 0;

struct Setup {
  void *qkv = nullptr, *kc = nullptr, *vc = nullptr, *out = nullptr, *ints = nullptr;
  float *part = nullptr, *po = nullptr, *pml = nullptr;
  int* counters = nullptr;
  void* flush = nullptr;
  size_t part_floats = 0;
  gpu::AttentionArgs a;
  ~Setup() {
    for (void* p : {qkv, kc, vc, out, ints, static_cast<void*>(part), static_cast<void*>(po),
                    static_cast<void*>(pml), static_cast<void*>(counters), flush})
      if (p) cudaFree(p);
  }
};

constexpr size_t kFlushBytes = size_t(256) << 20;  // > L2 (50 MB H100, 60 MB H200)

// seqs: (kv_len, n_new) per sequence, each with its own blocks; tiles of spt slots.
void make_setup(Setup& S, const std::vector<std::pair<int, int>>& seqs, int spt, int splits) {
  int n_slots = 0, blocks = 0, max_nb = 0;
  for (auto [kv, n] : seqs) {
    n_slots += n;
    blocks += (kv + n + cache_bs - 1) / cache_bs;
    max_nb = std::max(max_nb, (kv + n + cache_bs - 1) / cache_bs);
  }
  const int n_seqs = int(seqs.size());
  const int spread = scatter_pool > 0 ? std::max(1, scatter_pool / (max_nb * n_seqs)) : 1;
  if (scatter_pool > 0) blocks = std::max(blocks, max_nb * n_seqs * spread);
  const size_t cache_elems = size_t(blocks) * cache_bs * n_kv * kD;
  LOOM_CUDA_CHECK(cudaMalloc(&S.qkv, size_t(n_slots) * (n_heads + 2 * n_kv) * kD * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&S.kc, cache_elems * (kv_fp8 ? 1 : 2)));
  LOOM_CUDA_CHECK(cudaMalloc(&S.vc, cache_elems * (kv_fp8 ? 1 : 2)));
  LOOM_CUDA_CHECK(cudaMalloc(&S.out, size_t(n_slots) * n_heads * kD * 2));
  LOOM_CUDA_CHECK(cudaMalloc(&S.flush, kFlushBytes));
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, S.qkv, size_t(n_slots) * (n_heads + 2 * n_kv) * kD, 1,
                                1.0f, nullptr));
  // Random values in both dtypes (e4m3 by the KV quantizer): constant caches time the same
  // but draw less power than real data.
  const DType kv_t = kv_fp8 ? DType::F8E4M3 : DType::BF16;
  LOOM_KERNEL(gpu::fill_uniform(kv_t, S.kc, cache_elems, 2, 1.0f, nullptr));
  LOOM_KERNEL(gpu::fill_uniform(kv_t, S.vc, cache_elems, 3, 1.0f, nullptr));
  const int bt_width = (14550 + cache_bs - 1) / cache_bs;  // a 22-frame Terra sequence's blocks
  // Ints: block tables [n_seqs, bt_width], kv_len, slot_start, tiles.
  std::vector<int32_t> bt, kv_len, slot_start{0}, tiles;
  int next = 0;
  for (size_t s = 0; s < seqs.size(); s++) {
    const auto [kv, n] = seqs[s];
    const int nb = (kv + n + cache_bs - 1) / cache_bs;
    const int lead = share_group > 1 ? int(s) - int(s) % share_group : int(s);
    for (int j = 0; j < bt_width; j++)
      bt.push_back(j >= nb                                       ? -1
                   : lead != int(s) && j < share_keys / cache_bs ? bt[size_t(lead) * bt_width + j]
                   : scatter_pool > 0                            ? (j * n_seqs + int(s)) * spread
                                                                 : next + j);
    next += nb;
    kv_len.push_back(kv);
    slot_start.push_back(slot_start.back() + n);
    for (int j0 = 0; j0 < n; j0 += spt)
      tiles.insert(tiles.end(), {int(s), j0, std::min(spt, n - j0)});
  }
  std::vector<int32_t> h = bt;
  const size_t o_kv = h.size();
  h.insert(h.end(), kv_len.begin(), kv_len.end());
  const size_t o_ss = h.size();
  h.insert(h.end(), slot_start.begin(), slot_start.end());
  const size_t o_tiles = h.size();
  h.insert(h.end(), tiles.begin(), tiles.end());
  LOOM_CUDA_CHECK(cudaMalloc(&S.ints, h.size() * 4));
  LOOM_CUDA_CHECK(cudaMemcpy(S.ints, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  const int32_t* I = static_cast<const int32_t*>(S.ints);
  const int n_tiles = int(tiles.size() / 3);
  S.part_floats = gpu::attention_mma_partial_floats(n_tiles, n_kv, n_heads, kD, bt_width, cache_bs);
  LOOM_CUDA_CHECK(cudaMalloc(&S.part, S.part_floats * 4));
  LOOM_CUDA_CHECK(cudaMalloc(&S.counters, size_t(n_tiles) * n_kv * 4));
  LOOM_CUDA_CHECK(cudaMemset(S.counters, 0, size_t(n_tiles) * n_kv * 4));
  const size_t blk = size_t(n_tiles) * n_kv * splits;
  LOOM_CUDA_CHECK(cudaMalloc(&S.po, gpu::attention_partial_floats(blk, kD) * 4));
  LOOM_CUDA_CHECK(cudaMalloc(&S.pml, blk * gpu::kAttnRows * 2 * 4));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  gpu::AttentionArgs& a = S.a;
  a.t = DType::BF16;
  a.qkv = S.qkv;
  a.k_cache = S.kc;
  a.v_cache = S.vc;
  a.block_tables = I;
  a.bt_stride = bt_width;
  a.kv_len = I + o_kv;
  a.slot_start = I + o_ss;
  a.tiles = I + o_tiles;
  a.n_tiles = n_tiles;
  a.heads = n_heads;
  a.kv_heads = n_kv;
  a.head_dim = kD;
  a.block_size = cache_bs;
  a.num_splits = splits;
  a.partial_o = S.po;
  a.partial_ml = S.pml;
  a.mma_partial = S.part;
  a.mma_partial_floats = S.part_floats;
  a.mma_counters = S.counters;
  a.mma_counters_len = size_t(n_tiles) * n_kv;
  a.out = S.out;
  a.kv_fp8 = kv_fp8;
  a.cache_slots = blocks * cache_bs;
}

// Mean microseconds of one paged_attention call with args a, L2 flushed before each.
double time_us(Setup& S, const gpu::AttentionArgs& a, cudaStream_t stream, int iters) {
  std::vector<cudaEvent_t> ev(size_t(2 * iters));
  for (auto& e : ev) LOOM_CUDA_CHECK(cudaEventCreate(&e));
  LOOM_KERNEL(gpu::paged_attention(a, stream));  // warm-up (and the smem attribute)
  for (int i = 0; i < iters; i++) {
    LOOM_CUDA_CHECK(cudaMemsetAsync(S.flush, i & 0xff, kFlushBytes, stream));
    LOOM_CUDA_CHECK(cudaEventRecord(ev[size_t(2 * i)], stream));
    LOOM_KERNEL(gpu::paged_attention(a, stream));
    LOOM_CUDA_CHECK(cudaEventRecord(ev[size_t(2 * i + 1)], stream));
  }
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
  double total = 0;
  for (int i = 0; i < iters; i++) {
    float ms = 0;
    LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[size_t(2 * i)], ev[size_t(2 * i + 1)]));
    total += ms;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  return 1e3 * total / iters;
}

// The raw bf16 output [n_slots, heads * kD] of one paged_attention call with args x over S's
// world (out_n elements; the output buffer poisoned first).
std::vector<uint16_t> attention_output(Setup& S, const gpu::AttentionArgs& x, size_t out_n,
                                       cudaStream_t stream) {  // (non-blocking: all on it)
  LOOM_CUDA_CHECK(cudaMemsetAsync(S.out, 0xff, out_n * 2, stream));
  LOOM_KERNEL(gpu::paged_attention(x, stream));
  std::vector<uint16_t> v(out_n);
  LOOM_CUDA_CHECK(cudaMemcpyAsync(v.data(), S.out, out_n * 2, cudaMemcpyDeviceToHost, stream));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return v;
}

json decode_entry(cudaStream_t stream, int sms, int batch, int ctx) {
  // The CUDA-core path's splits as pick_splits chose them (4 blocks per SM, at most 128).
  const int pairs = batch * n_kv;
  const int splits = std::max(1, std::min(128, (4 * sms + pairs - 1) / pairs));
  Setup S;
  make_setup(S, std::vector<std::pair<int, int>>(size_t(batch), {ctx, 1}), 1, splits);
  const double kv_bytes = 2.0 * batch * (ctx + 1) * n_kv * kD * (kv_fp8 ? 1 : 2);
  const int iters = batch * ctx > 500000 ? 10 : 30;
  gpu::AttentionArgs a = S.a;
  a.decode = true;
  // The TMA pipeline's builds, each checked bitwise against the split kernel's output first.
  using DK = gpu::AttentionArgs::DecodeKernel;
  const size_t out_n = size_t(batch) * n_heads * kD;
  auto output = [&](const gpu::AttentionArgs& x) { return attention_output(S, x, out_n, stream); };
  a.decode_kernel = DK::Split;
  const std::vector<uint16_t> want = output(a);
  json tma = json::array();
  for (int cfg = 0; cfg < kTmaDecodeConfigs; cfg++) {
    gpu::AttentionArgs t = a;
    t.decode_kernel = DK::Tma;
    t.tma_config = cfg;
    const bool same = output(t) == want;
    const double us = time_us(S, t, stream, iters);
    std::printf("attention decode %s b%-3d ctx %5d: TMA config %d %8.2f us (%5.0f GB/s)%s\n",
                kv_fp8 ? "fp8 " : "bf16", batch, ctx, cfg, us, kv_bytes / (us * 1e-6) / 1e9,
                same ? "" : "  NOT the split kernel's bits");
    tma.push_back({{"config", cfg},
                   {"us", us},
                   {"gbps", kv_bytes / (us * 1e-6) / 1e9},
                   {"same_bits_as_split", same}});
  }
  const double mma = time_us(S, a, stream, iters);  // combine in the decode kernel's last block
  gpu::AttentionArgs c = a;
  c.mma_counters = nullptr;
  const double mma_combine = time_us(S, c, stream, iters);  // + the combine kernel
  a.decode = false;  // the tensor-core prefill kernel on one-slot tiles (same bits)
  const double mma_prefill = time_us(S, a, stream, iters);
  a.decode = true;
  a.mma = false;  // the CUDA-core decode kernel (+ its combine)
  const double core = time_us(S, a, stream, iters);
  auto gbps = [&](double us) { return kv_bytes / (us * 1e-6) / 1e9; };
  std::printf(
      "attention decode %s b%-3d ctx %5d: mma %8.2f us (%5.0f GB/s)  mma+combine-kernel %8.2f us  "
      "mma-prefill-kernel %8.2f us  cuda-core %8.2f us (%5.0f GB/s)\n",
      kv_fp8 ? "fp8 " : "bf16", batch, ctx, mma, gbps(mma), mma_combine, mma_prefill, core,
      gbps(core));
  return {{"batch", batch},
          {"ctx", ctx},
          {"kv_dtype", kv_fp8 ? "fp8" : "bf16"},
          {"kv_bytes", kv_bytes},
          {"mma_us", mma},
          {"mma_gbps", gbps(mma)},
          {"mma_combine_kernel_us", mma_combine},
          {"mma_prefill_kernel_us", mma_prefill},
          {"cuda_core_us", core},
          {"cuda_core_gbps", gbps(core)},
          {"tma", tma}};
}

json prefill_entry(cudaStream_t stream, int n) {
  const double flop = 4.0 * n_heads * kD * (double(n) * (n + 1) / 2);  // QK and PV, causal
  Setup S;
  make_setup(S, {{0, n}}, gpu::attention_slots_per_tile(DType::BF16, n_heads, n_kv, kD), 1);
  const double mma = time_us(S, S.a, stream, 10);
  Setup C;  // the CUDA-core kernel's tiles
  make_setup(C, {{0, n}}, gpu::attention_slots_per_tile(n_heads, n_kv), 1);
  gpu::AttentionArgs a = C.a;
  a.mma = false;
  const double core = time_us(C, a, stream, 5);
  std::printf("attention prefill %d slots: mma %.3f ms (%.1f TFLOP/s)  cuda-core %.3f ms\n", n,
              mma * 1e-3, flop / (mma * 1e-6) / 1e12, core * 1e-3);
  return {{"slots", n},
          {"mma_ms", mma * 1e-3},
          {"mma_tflops", flop / (mma * 1e-6) / 1e12},
          {"cuda_core_ms", core * 1e-3}};
}

// The timing method's floor: a 4-byte memset (one tiny kernel) between the same event pair,
// after the same L2 flush.
double floor_us(cudaStream_t stream) {
  void* flush = nullptr;
  void* tiny = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&flush, kFlushBytes));
  LOOM_CUDA_CHECK(cudaMalloc(&tiny, 4));
  cudaEvent_t e0, e1;
  LOOM_CUDA_CHECK(cudaEventCreate(&e0));
  LOOM_CUDA_CHECK(cudaEventCreate(&e1));
  double total = 0;
  const int iters = 30;
  for (int i = 0; i < iters; i++) {
    LOOM_CUDA_CHECK(cudaMemsetAsync(flush, i & 0xff, kFlushBytes, stream));
    LOOM_CUDA_CHECK(cudaEventRecord(e0, stream));
    LOOM_CUDA_CHECK(cudaMemsetAsync(tiny, 0, 4, stream));
    LOOM_CUDA_CHECK(cudaEventRecord(e1, stream));
    LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    total += ms;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(flush);
  cudaFree(tiny);
  return 1e3 * total / iters;
}

}  // namespace

json attention_prefill_case(cudaStream_t stream, int slots, int seqs, bool fp8) {
  kv_fp8 = fp8;
  const double flop = 4.0 * n_heads * kD * (double(slots) * (slots + 1) / 2) * seqs;  // causal
  Setup S;
  make_setup(S, std::vector<std::pair<int, int>>(size_t(seqs), {0, slots}),
             gpu::attention_slots_per_tile(DType::BF16, n_heads, n_kv, kD), 1);
  S.a.decode = false;
  const size_t out_bytes = size_t(seqs) * slots * n_heads * kD * 2;
  std::vector<char> first, bits(out_bytes);
  json r = {
      {"slots", slots}, {"sequences", seqs}, {"kv_dtype", fp8 ? "fp8" : "bf16"}, {"flop", flop}};
  for (int round = 0; round < 2; round++)
    for (int blocks : {0, 3})
      for (int stages = 2; stages <= 4; stages++) {
        S.a.prefill_stages = stages;
        S.a.prefill_blocks_per_sm = blocks;
        const double us = time_us(S, S.a, stream, 10);
        LOOM_CUDA_CHECK(cudaMemcpy(bits.data(), S.out, out_bytes, cudaMemcpyDeviceToHost));
        if (first.empty()) first = bits;
        const bool same = bits == first;
        std::printf(
            "attention prefill %s %d x %d slots, %d stages, %d blocks an SM: %.1f us (%.1f "
            "TFLOP/s)%s\n",
            fp8 ? "fp8 " : "bf16", seqs, slots, stages, blocks, us, flop / us / 1e6,
            same ? "" : "  NOT the first build's bits");
        r["runs"].push_back({{"stages", stages},
                             {"blocks_per_sm", blocks},
                             {"us", us},
                             {"tflops", flop / us / 1e6},
                             {"same_bits", same}});
      }
  kv_fp8 = false;
  return r;
}

json attention_decode_case(cudaStream_t stream, int sms, int batch, int ctx, int kv_heads, bool fp8,
                           int block_size) {
  n_kv = kv_heads;
  n_heads = 8 * kv_heads;
  kv_fp8 = fp8;
  cache_bs = block_size;
  json r = decode_entry(stream, sms, batch, ctx);
  r["kv_heads"] = kv_heads;
  r["block_size"] = block_size;
  n_heads = 32;
  n_kv = 4;
  kv_fp8 = false;
  cache_bs = 16;
  return r;
}

json attention_shared_case(cudaStream_t stream, int batch, int ctx, int group, int shared,
                           bool fp8) {
  // The TMA decode kernel at `batch` sequences of context ctx, each with its own blocks, then
  // in groups of `group` sharing the blocks of their first `shared` keys (read through L2),
  // each config (bits checked against config 0). L2 flushed before each call, as in a step.
  // Reading a group's shared keys once (a kernel ahead of this one, or a block's warps sharing
  // a ring) was never faster than L2 (session 21,
  // bench/results/2026-11-28-h200-s21-read-once-a-block-not-kept.json); nor was an L2
  // evict_last hint on those keys' loads (bf16 b256 ctx 8000: 465.0 against 464.9 us,
  // bench/results/2026-11-28-h200-attention-shared-prefix-l2-hint-not-kept.json).
  kv_fp8 = fp8;
  const std::vector<std::pair<int, int>> seqs(size_t(batch), {ctx, 1});
  const double kv_bytes = 2.0 * batch * (ctx + 1) * n_kv * kD * (kv_fp8 ? 1 : 2);
  json r = {{"batch", batch},
            {"ctx", ctx},
            {"group", group},
            {"shared_keys", shared},
            {"kv", fp8 ? "fp8" : "bf16"}};
  std::vector<uint16_t> first;
  for (const char* mode : {"unshared", "shared"}) {
    share_group = mode[0] != 'u' ? group : 0;
    share_keys = shared;
    Setup S;
    make_setup(S, seqs, 1, 1);
    gpu::AttentionArgs a = S.a;
    a.decode = true;
    a.decode_kernel = gpu::AttentionArgs::DecodeKernel::Tma;
    a.tma_shared_kv = share_group > 1;  // as the backend sets it (its default config's choice)
    const size_t out_n = size_t(batch) * n_heads * kD;
    const std::vector<uint16_t> out = attention_output(S, a, out_n, stream);
    const double us = time_us(S, a, stream, 10);
    // (shared against unshared: the same unless the cache's values differ by sequence)
    const bool same = first.empty() || out == first;
    first = out;
    std::printf(
        "attention shared %s b%d ctx %d, groups of %d sharing %d keys: %-9s %8.2f us "
        "(%5.0f GB/s of every sequence's KV)%s\n",
        fp8 ? "fp8" : "bf16", batch, ctx, group, shared, mode, us, kv_bytes / (us * 1e-6) / 1e9,
        same ? "" : "  NOT the previous mode's bits");
    r[mode] = {{"us", us}, {"same_bits", same}};
    // Variants on the same world, bits checked against config 0: the TMA kernel's other
    // configs; shared, the pairs in 1 (none staggered), 2 (the default), 4 or 8 stagger classes,
    // and in group blocks.
    auto variant = [&](const char* key, const char* name, int value, const gpu::AttentionArgs& c) {
      const std::vector<uint16_t> o = attention_output(S, c, out_n, stream);
      const double cus = time_us(S, c, stream, 10);
      std::printf("attention shared %s b%d ctx %d: %-9s %s %d %8.2f us%s\n", fp8 ? "fp8" : "bf16",
                  batch, ctx, mode, name, value, cus, o == out ? "" : "  NOT config 0's bits");
      r[mode][key].push_back({{name, value}, {"us", cus}, {"same_bits", o == out}});
    };
    for (int cfg = 1; cfg < kTmaDecodeConfigs; cfg++) {
      gpu::AttentionArgs c = a;
      c.tma_config = cfg;
      variant("configs", "config", cfg, c);
    }
    for (int stagger : {1, 2, 4, 8}) {
      if (share_group <= 1) break;
      gpu::AttentionArgs c = a;
      c.tma_stagger = stagger;
      variant("staggers", "stagger", stagger, c);
    }
    if (share_group > 1) {  // group blocks (the backend's choice where prefixes are long)
      gpu::AttentionArgs c = a;
      c.tma_group = true;
      variant("groups", "group", 1, c);
    }
  }
  share_group = share_keys = 0;
  kv_fp8 = false;
  return r;
}

// Terra's four layer GEMMs (qkv 2560, o 2048, gate_up 11264 over k 2048; down 2048 over k
// 5632) through cuBLAS on random bf16 weights and inputs of up to `rows` rows; each writes the
// same output buffer y [m, 2 I] (bytes: out_bytes).
struct TerraGemms {
  static constexpr int H = 2048, I = 5632, Q = 2560;
  void *x = nullptr, *w = nullptr;  // x [rows, I]; w: qkv, o, gate_up, down back to back
  explicit TerraGemms(int rows) {
    LOOM_CUDA_CHECK(cudaMalloc(&x, size_t(rows) * I * 2));
    LOOM_CUDA_CHECK(cudaMalloc(&w, w_elems() * 2));
    LOOM_KERNEL(gpu::fill_uniform(DType::BF16, x, size_t(rows) * I, 5, 1.0f, nullptr));
    LOOM_KERNEL(gpu::fill_uniform(DType::BF16, w, w_elems(), 6, 0.02f, nullptr));
  }
  ~TerraGemms() {
    cudaFree(x);
    cudaFree(w);
  }
  static size_t w_elems() {
    return size_t(Q) * H + size_t(H) * H + size_t(2 * I) * H + size_t(H) * I;
  }
  static size_t out_bytes(int rows) { return size_t(rows) * 2 * I * 2; }
  void run(gpu::Gemm& g, void* y, int m) const {
    const uint16_t* wq = static_cast<const uint16_t*>(w);  // bf16 bits
    const uint16_t* wo = wq + size_t(Q) * H;
    const uint16_t* wgu = wo + size_t(H) * H;
    const uint16_t* wd = wgu + size_t(2 * I) * H;
    g.run(DType::BF16, x, wq, DType::BF16, y, m, Q, H);
    g.run(DType::BF16, x, wo, DType::BF16, y, m, H, H);
    g.run(DType::BF16, x, wgu, DType::BF16, y, m, 2 * I, H);
    g.run(DType::BF16, x, wd, DType::BF16, y, m, H, I);
  }
};

json attention_overlap_case(cudaStream_t stream, int batch, int ctx, bool fp8) {
  // Two half-batches on two streams, each half's attention beside the other's layer GEMMs:
  // does the device run them at once? Timed: the decode attention of `batch` sequences at
  // context ctx on `stream`; Terra's four layer GEMMs (qkv 2560, o 2048, gate_up 11264 over
  // k 2048; down 2048 over k 5632) at m = batch through cuBLAS on a second stream; both at once
  // (fork and join by events); and one after the other. L2 flushed before each.
  kv_fp8 = fp8;
  Setup S;
  make_setup(S, std::vector<std::pair<int, int>>(size_t(batch), {ctx, 1}), 1, 1);
  gpu::AttentionArgs a = S.a;
  a.decode = true;
  const int m = batch;
  const TerraGemms tg(m);
  void* y = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&y, TerraGemms::out_bytes(m)));
  cudaStream_t s2;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  gpu::Gemm gemm;
  gemm.init(s2);
  auto chain = [&] { tg.run(gemm, y, m); };
  cudaEvent_t e0, e1, fork, join;
  for (cudaEvent_t* e : {&e0, &e1, &fork, &join}) LOOM_CUDA_CHECK(cudaEventCreate(e));
  // The attention on `stream` and / or the GEMMs on s2, the GEMMs after the attention where
  // `after` (one after the other), else beside it.
  auto time_mode = [&](bool attn, bool gemms, bool after) {
    std::vector<double> us;
    for (int i = 0; i < 12; i++) {
      LOOM_CUDA_CHECK(cudaMemsetAsync(S.flush, i & 0xff, kFlushBytes, stream));
      LOOM_CUDA_CHECK(cudaEventRecord(e0, stream));
      if (attn && after) LOOM_KERNEL(gpu::paged_attention(a, stream));
      LOOM_CUDA_CHECK(cudaEventRecord(fork, stream));
      LOOM_CUDA_CHECK(cudaStreamWaitEvent(s2, fork, 0));
      if (attn && !after) LOOM_KERNEL(gpu::paged_attention(a, stream));
      if (gemms) chain();
      LOOM_CUDA_CHECK(cudaEventRecord(join, s2));
      LOOM_CUDA_CHECK(cudaStreamWaitEvent(stream, join, 0));
      LOOM_CUDA_CHECK(cudaEventRecord(e1, stream));
      LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 2) us.push_back(1e3 * ms);  // the first two warm up
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  const double attn = time_mode(true, false, false), gemms = time_mode(false, true, false);
  const double both = time_mode(true, true, false), seq = time_mode(true, true, true);
  std::printf(
      "overlap %s b%d ctx %d: attention %.1f us, GEMMs (m %d) %.1f us, at once %.1f us, one "
      "after the other %.1f us (at once / max %.3f)\n",
      fp8 ? "fp8" : "bf16", batch, ctx, attn, m, gemms, both, seq, both / std::max(attn, gemms));
  for (cudaEvent_t e : {e0, e1, fork, join}) cudaEventDestroy(e);
  cudaStreamDestroy(s2);
  cudaFree(y);
  kv_fp8 = false;
  return {{"batch", batch},       {"ctx", ctx},        {"kv_dtype", fp8 ? "fp8" : "bf16"},
          {"attention_us", attn}, {"gemms_us", gemms}, {"at_once_us", both},
          {"sequential_us", seq}, {"gemm_m", m}};
}

json attention_pipeline_case(cudaStream_t stream, int batch, int ctx, bool fp8, int layers,
                             bool power) {
  // The two-group decode step (issue 13's largest open question): `layers` layers of Terra's
  // decode attention (TMA kernel, 64-slot blocks as the engine's default) and its four layer
  // GEMMs (cuBLAS), for `batch` sequences at context ctx, four ways:
  //   serial    one stream, every layer attention(batch) then the GEMMs at m = batch: today's step;
  //   halves    one stream, the two halves' layers one after the other (no overlap; the cost of
  //             halving alone);
  //   pipelined two streams, half A (attention then GEMMs each layer) and half B (GEMMs then
  //             attention: half a layer behind), independent as two groups of sequences are, so
  //             that one half's attention (HBM) can run beside the other's GEMMs (tensor cores);
  //   aligned   the same two streams with both halves starting on attention.
  // Norms, activations and lm_head are left out (the same in every mode). Each half has its
  // own cache, so the two streams never share L2 lines; the full batch has its own too.
  // power: serial and pipelined also replayed for ~3 s each (blocks at most 2 an SM), with
  // NVML's energy counter and SM clock: under a power cap (the H200's 700 W, which the 256-job
  // FP8 run holds) time follows joules, so overlap pays only where it saves energy.
  kv_fp8 = fp8;
  const int saved_bs = cache_bs;
  cache_bs = 64;
  const int half = batch / 2;
  Setup SA, SB, SF;
  make_setup(SA, std::vector<std::pair<int, int>>(size_t(half), {ctx, 1}), 1, 1);
  make_setup(SB, std::vector<std::pair<int, int>>(size_t(batch - half), {ctx, 1}), 1, 1);
  make_setup(SF, std::vector<std::pair<int, int>>(size_t(batch), {ctx, 1}), 1, 1);
  for (Setup* S : {&SA, &SB, &SF}) S->a.decode = true;
  const TerraGemms tg(batch);
  void *ya = nullptr, *yb = nullptr;  // an output buffer a stream
  LOOM_CUDA_CHECK(cudaMalloc(&ya, TerraGemms::out_bytes(batch)));
  LOOM_CUDA_CHECK(cudaMalloc(&yb, TerraGemms::out_bytes(batch)));
  cudaStream_t s2;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  gpu::Gemm ga, gb;
  ga.init(stream);
  gb.init(s2);
  auto attn = [&](Setup& S, cudaStream_t st) { LOOM_KERNEL(gpu::paged_attention(S.a, st)); };
  cudaEvent_t fork, join;
  for (cudaEvent_t* e : {&fork, &join}) LOOM_CUDA_CHECK(cudaEventCreate(e));
  // Median µs a layer of `layers` layers issued by `issue` on `stream` (L2 flushed before each).
  auto time_layers = [&](const std::function<void()>& issue) {
    const std::vector<double> ms = bench::event_times_ms(stream, 5, 2, issue, [&](int i) {
      LOOM_CUDA_CHECK(cudaMemsetAsync(SF.flush, i & 0xff, kFlushBytes, stream));
    });
    return 1e3 * ms[ms.size() / 2] / layers;
  };
  auto two_streams = [&](bool offset) {
    LOOM_CUDA_CHECK(cudaEventRecord(fork, stream));
    LOOM_CUDA_CHECK(cudaStreamWaitEvent(s2, fork, 0));
    for (int l = 0; l < layers; l++) {
      attn(SA, stream);
      tg.run(ga, ya, half);
      if (offset) tg.run(gb, yb, batch - half);
      attn(SB, s2);
      if (!offset) tg.run(gb, yb, batch - half);
    }
    LOOM_CUDA_CHECK(cudaEventRecord(join, s2));
    LOOM_CUDA_CHECK(cudaStreamWaitEvent(stream, join, 0));
  };
  auto serial_layers = [&] {
    for (int l = 0; l < layers; l++) {
      attn(SF, stream);
      tg.run(ga, ya, batch);
    }
  };
  json r = {{"batch", batch},
            {"ctx", ctx},
            {"kv_dtype", fp8 ? "fp8" : "bf16"},
            {"layers", layers},
            {"block_size", cache_bs}};
  const double attn_full = time_layers([&] {
    for (int l = 0; l < layers; l++) attn(SF, stream);
  });
  const double attn_half = time_layers([&] {
    for (int l = 0; l < layers; l++) attn(SA, stream);
  });
  const double gemm_full = time_layers([&] {
    for (int l = 0; l < layers; l++) tg.run(ga, ya, batch);
  });
  const double gemm_half = time_layers([&] {
    for (int l = 0; l < layers; l++) tg.run(ga, ya, half);
  });
  for (int per_sm : {2, 1}) {
    for (Setup* S : {&SA, &SB, &SF}) S->a.tma_blocks_per_sm = per_sm;
    const double serial = time_layers(serial_layers);
    const double halves = time_layers([&] {
      for (int l = 0; l < layers; l++) {
        attn(SA, stream);
        tg.run(ga, ya, half);
        attn(SB, stream);
        tg.run(ga, yb, batch - half);
      }
    });
    const double piped = time_layers([&] { two_streams(true); });
    const double aligned = time_layers([&] { two_streams(false); });
    std::printf(
        "pipeline %s b%d ctx %d, attention blocks an SM <= %d, us a layer: serial %.1f, halves "
        "%.1f, pipelined %.1f (%.3f of serial), aligned %.1f (%.3f)\n",
        fp8 ? "fp8" : "bf16", batch, ctx, per_sm, serial, halves, piped, piped / serial, aligned,
        aligned / serial);
    r["modes"].push_back({{"attention_blocks_per_sm", per_sm},
                          {"serial_us", serial},
                          {"halves_us", halves},
                          {"pipelined_us", piped},
                          {"aligned_us", aligned}});
  }
  if (power) {
    const bench::Nvml nvml;
    for (Setup* S : {&SA, &SB, &SF}) S->a.tma_blocks_per_sm = 2;
    auto sustained = [&](const char* mode, const std::function<void()>& issue) {
      issue();
      LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
      using clock = std::chrono::steady_clock;
      const auto t0 = clock::now();
      const double e0 = nvml.joules();
      int n = 0;
      double s = 0;
      while (s < 3.0) {
        for (int i = 0; i < 8; i++) issue();
        n += 8;
        LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
        s = std::chrono::duration<double>(clock::now() - t0).count();
      }
      const double j = nvml.joules() - e0, per = double(n) * layers;
      const unsigned mhz = nvml.sm_mhz();
      std::printf(
          "pipeline %s b%d ctx %d, sustained %-9s %.1f us a layer, %.4f J a layer, %.0f W, SM "
          "%u MHz%s\n",
          fp8 ? "fp8" : "bf16", batch, ctx, mode, 1e6 * s / per, j / per, j / s, mhz,
          nvml.ok() ? "" : " (no NVML)");
      r["sustained"].push_back({{"mode", mode},
                                {"us_a_layer", 1e6 * s / per},
                                {"joules_a_layer", j / per},
                                {"watts", j / s},
                                {"sm_mhz", mhz}});
    };
    sustained("serial", serial_layers);
    sustained("pipelined", [&] { two_streams(true); });
  }
  std::printf(
      "pipeline %s b%d ctx %d, alone, us a layer: attention b%d %.1f, b%d %.1f; GEMMs m %d %.1f, "
      "m %d %.1f\n",
      fp8 ? "fp8" : "bf16", batch, ctx, batch, attn_full, half, attn_half, batch, gemm_full, half,
      gemm_half);
  r["alone"] = {{"attention_full_us", attn_full},
                {"attention_half_us", attn_half},
                {"gemms_full_us", gemm_full},
                {"gemms_half_us", gemm_half}};
  for (cudaEvent_t e : {fork, join}) cudaEventDestroy(e);
  cudaStreamDestroy(s2);
  for (void* p : {ya, yb}) cudaFree(p);
  kv_fp8 = false;
  cache_bs = saved_bs;
  return r;
}

json attention_mma_bench(cudaStream_t stream, int sms) {
  const double floor = floor_us(stream);
  std::printf("attention decode timing floor (4-byte memset between the events): %.2f us\n", floor);
  json dec = json::array();
  const std::vector<std::pair<int, int>> cases = {{1, 600},   {1, 7000},  {1, 14000},
                                                  {16, 600},  {16, 8000}, {64, 600},
                                                  {64, 8000}, {256, 600}, {256, 8000}};
  for (auto [b, ctx] : cases) dec.push_back(decode_entry(stream, sms, b, ctx));
  kv_fp8 = true;
  for (auto [b, ctx] : cases) dec.push_back(decode_entry(stream, sms, b, ctx));
  // As a running batch leaves its blocks: 256 sequences' blocks interleaved over a pool of a
  // whole H200's size (718,018 blocks of 16 slots, FP8), one layer's K and V.
  scatter_pool = 718018;
  for (bool f8 : {false, true}) {
    kv_fp8 = f8;
    std::printf("scattered blocks (pool of %d):\n", scatter_pool);
    json e = decode_entry(stream, sms, 256, 8000);
    e["scatter_pool_blocks"] = scatter_pool;
    dec.push_back(e);
  }
  scatter_pool = 0;
  kv_fp8 = false;
  return {{"decode", dec}, {"prefill", prefill_entry(stream, 1746)}, {"floor_us", floor}};
}

}  // namespace loom
