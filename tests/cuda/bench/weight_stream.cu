// cuda_bench weight_stream: how fast one persistent CTA per SM can stream a weight buffer into
// the SM, for the engines the megakernel could be built on (issue 15: its step still takes
// 1.48 ms with neither dot products nor waits, ~2.0 TB/s; bench/NOTES-cuda.md). Each CTA reads
// its contiguous share of a 1 GiB buffer once, every byte read from shared memory or registers
// by a consumer thread (a 32-bit sum, checked against the host's), nothing else:
//   ring    W warps, each with S slots of `seg` bytes; lane 0 bulk-copies its next segment
//           (cp.async.bulk, mbarrier a slot) once the warp has read the slot: the megakernel's
//           current engine (W 16, seg 4 KB, S 2-3). With `rows` R > 1 a segment is R pieces of
//           seg / R bytes from R rows of seg bytes (column block q mod R of rows R (q / R) …),
//           each piece `split` copies: the tensor-core GEMVs' segments (8 rows × 512 bytes,
//           a piece in two where its rotation wraps), so many more, smaller copies a byte.
//   pages   one loader warp fills a CTA ring of N pages of P bytes (one bulk copy a page, a full
//           and an empty mbarrier a page); 15 consumer warps read every page and release it.
//   ldg     512 threads, U 16-byte loads in flight each (ld.global.nc), no shared memory.
// With `every` > 0 the consumers stop every `every` bytes a CTA as at a megakernel instruction
// boundary (a barrier, an L2 round trip, a barrier; the ring's warps all stop, the pages'
// loader does not). The time is the median of 7 launches after 2 (CUDA events); GB/s counts
// the bytes read.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "bench.h"
#include "core/error.h"
#include "kernels/common.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/tma.cuh"

namespace loom::bench {
namespace {

using loom::gpu::bulk_load;
using loom::gpu::fence_proxy_async;
using loom::gpu::mbar_arrive;
using loom::gpu::mbar_expect_tx;
using loom::gpu::mbar_init;
using loom::gpu::mbar_wait;

constexpr int kThreads = 512;

__device__ __forceinline__ uint32_t sum4(uint4 v) {
  return v.x + v.y + v.z + v.w;
}

// Adds a thread's sum into the CTA's result.
__device__ __forceinline__ void finish(uint32_t s, uint32_t* out) {
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out + blockIdx.x, s);
}

// An instruction boundary as the megakernel has them: a barrier of the consumers, one L2 round
// trip a thread (its staged input), a barrier. Barrier `id` over `threads` threads; returns 0
// (the probe buffer is zero) so that the load is used.
__device__ __forceinline__ uint32_t stall(const uint32_t* probe, int i, int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
  const uint32_t v = __ldcg(probe + ((i * 512 + int(threadIdx.x)) & 16383));
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
  return v;
}

// ring: warp w streams segments w, w + W, … of its CTA's share through S slots of seg bytes.
__global__ void __launch_bounds__(kThreads, 1)
    ring_kernel(const char* buf, size_t share, int W, int seg, int S, int rows, int split,
                int every, const uint32_t* probe, uint32_t* out) {
  extern __shared__ __align__(128) char smem[];
  __shared__ uint64_t bar[16][4];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const char* base = buf + size_t(blockIdx.x) * share;
  const int segs = int(share / size_t(seg));
  uint32_t s = 0;
  if (warp < W) {
    char* ring = smem + size_t(warp) * S * seg;
    if (lane == 0)
      for (int i = 0; i < S; i++) mbar_init(&bar[warp][i], 1);
    loom::gpu::fence_mbar_init();
    __syncwarp();
    const int mine = (segs - warp + W - 1) / W;  // segments warp, warp + W, …
    const int piece = seg / rows, copy = piece / split;
    auto issue = [&](int i) {
      const int q = warp + i * W;  // the CTA's segment q: rows R (q / R) …, column block q mod R
      mbar_expect_tx(&bar[warp][i % S], uint32_t(seg));
      for (int p = 0; p < rows; p++)
        for (int h = 0; h < split; h++)
          bulk_load(ring + size_t(i % S) * seg + size_t(p) * piece + size_t(h) * copy,
                    base + (size_t(q / rows) * rows + p) * seg + size_t(q % rows) * piece +
                        size_t(h) * copy,
                    uint32_t(copy), &bar[warp][i % S]);
    };
    if (lane == 0)
      for (int i = 0; i < min(S, mine); i++) issue(i);
    for (int i = 0; i < mine; i++) {
      mbar_wait(&bar[warp][i % S], uint32_t(i / S) & 1u);
      const uint4* p = reinterpret_cast<const uint4*>(ring + size_t(i % S) * seg);
      for (int j = lane; j < seg / 16; j += 32) s += sum4(p[j]);
      __syncwarp();
      if (lane == 0 && i + S < mine) {
        fence_proxy_async();
        issue(i + S);
      }
      if (every > 0 && (i + 1) % (every / (W * seg)) == 0) s += stall(probe, i, 0, W * 32);
    }
  }
  finish(s, out);
}

// pages: warp 0 loads pages into N slots of P bytes; warps 1..15 read each page, then release it.
__global__ void __launch_bounds__(kThreads, 1)
    pages_kernel(const char* buf, size_t share, int P, int N, int every, const uint32_t* probe,
                 uint32_t* out) {
  extern __shared__ __align__(128) char smem[];
  __shared__ uint64_t full[16], empty[16];
  constexpr int kConsumers = kThreads / 32 - 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const char* base = buf + size_t(blockIdx.x) * share;
  const int pages = int(share / size_t(P));
  if (threadIdx.x == 0)
    for (int i = 0; i < N; i++) mbar_init(&full[i], 1), mbar_init(&empty[i], kConsumers);
  loom::gpu::fence_mbar_init();
  __syncthreads();
  uint32_t s = 0;
  if (warp == 0) {
    if (lane == 0)
      for (int i = 0; i < pages; i++) {
        if (i >= N) mbar_wait(&empty[i % N], uint32_t(i / N - 1) & 1u);
        mbar_expect_tx(&full[i % N], uint32_t(P));
        bulk_load(smem + size_t(i % N) * P, base + size_t(i) * P, uint32_t(P), &full[i % N]);
      }
  } else {
    const int c = warp - 1;
    for (int i = 0; i < pages; i++) {
      mbar_wait(&full[i % N], uint32_t(i / N) & 1u);
      const uint4* p = reinterpret_cast<const uint4*>(smem + size_t(i % N) * P);
      for (int j = c * 32 + lane; j < P / 16; j += kConsumers * 32) s += sum4(p[j]);
      fence_proxy_async();  // the reads before the loader's next copy into the page
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[i % N]);
      if (every > 0 && (i + 1) % (every / P) == 0) s += stall(probe, i, 1, kConsumers * 32);
    }
  }
  finish(s, out);
}

// ldg: U 16-byte loads in flight a thread, coalesced across the CTA.
template <int U>
__global__ void __launch_bounds__(kThreads, 1)
    ldg_kernel(const char* buf, size_t share, uint32_t* out) {
  const uint4* base = reinterpret_cast<const uint4*>(buf + size_t(blockIdx.x) * share);
  const size_t n = share / 16;
  uint32_t s = 0;
  for (size_t i0 = threadIdx.x; i0 < n; i0 += size_t(U) * kThreads) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t i = i0 + size_t(u) * kThreads;
      v[u] = i < n ? __ldg(base + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; u++) s += sum4(v[u]);
  }
  finish(s, out);
}

}  // namespace

nlohmann::json bench_weight_stream(const Context& c) {
  const size_t total = size_t(1) << 30;
  const size_t share = total / size_t(c.sms) / 65536 * 65536;
  char* buf = nullptr;
  uint32_t* out = nullptr;
  uint32_t* probe = nullptr;  // 64 KB of zeros, L2-resident: the staged inputs
  LOOM_CUDA_CHECK(cudaMalloc(&probe, 65536));
  LOOM_CUDA_CHECK(cudaMemsetAsync(probe, 0, 65536, c.stream));
  LOOM_CUDA_CHECK(cudaMalloc(&buf, total));
  LOOM_CUDA_CHECK(cudaMalloc(&out, size_t(c.sms) * 4));
  LOOM_CUDA_CHECK(cudaMemsetAsync(buf, 0x5A, total, c.stream));
  // Every 32-bit word is 0x5A5A5A5A: a CTA's sum is words · that, mod 2^32.
  const uint32_t expect = uint32_t(share / 4) * 0x5A5A5A5Au;
  cudaEvent_t e0, e1;
  LOOM_CUDA_CHECK(cudaEventCreate(&e0));
  LOOM_CUDA_CHECK(cudaEventCreate(&e1));
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%-8s %-42s %10s %10s %8s\n", "engine", "config", "us", "GB/s", "% copy");
  auto time = [&](const char* engine, const std::string& config, size_t smem, auto launch) {
    std::vector<float> ms;
    bool ok = true;
    for (int r = 0; r < 9; r++) {
      LOOM_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(c.sms) * 4, c.stream));
      LOOM_CUDA_CHECK(cudaEventRecord(e0, c.stream));
      launch();
      LOOM_CUDA_CHECK(cudaGetLastError());
      LOOM_CUDA_CHECK(cudaEventRecord(e1, c.stream));
      LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
      float t = 0;
      LOOM_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
      if (r >= 2) ms.push_back(t);
      std::vector<uint32_t> got(size_t(c.sms));
      LOOM_CUDA_CHECK(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost));
      for (uint32_t g : got) ok = ok && g == expect;
    }
    std::sort(ms.begin(), ms.end());
    const double us = 1e3 * ms[ms.size() / 2];
    const double gbps = double(share) * c.sms / (us * 1e-6) / 1e9;
    std::printf("%-8s %-42s %10.1f %10.0f %7.1f%%%s\n", engine, config.c_str(), us, gbps,
                100.0 * gbps / c.copy_gbps, ok ? "" : "  WRONG SUM");
    rows.push_back({{"engine", engine},
                    {"config", config},
                    {"smem_bytes", smem},
                    {"us", us},
                    {"gbps", gbps},
                    {"sum_ok", ok}});
  };
  const dim3 grid(unsigned(c.sms)), block(kThreads);
  // {W, seg, S, every, rows, split}: W · seg = 64 KB, so every warp streams as many segments.
  // Rows 8 split 1 / 2: the tensor-core GEMVs' segments without and with their wraps' copies.
  const std::vector<std::array<int, 6>> rings = {
      {16, 4096, 2, 0, 1, 1},     {16, 4096, 3, 0, 1, 1},     {8, 8192, 3, 0, 1, 1},
      {4, 16384, 3, 0, 1, 1},     {16, 4096, 3, 65536, 1, 1}, {16, 4096, 3, 196608, 1, 1},
      {8, 8192, 3, 196608, 1, 1}, {16, 4096, 2, 0, 8, 1},     {16, 4096, 2, 0, 8, 2},
      {16, 4096, 2, 65536, 1, 1}, {16, 4096, 2, 65536, 8, 2}};
  for (const std::array<int, 6>& r : rings) {
    const int W = r[0], seg = r[1], S = r[2], every = r[3], rows = r[4], split = r[5];
    const size_t smem = size_t(W) * S * seg;
    LOOM_CUDA_CHECK(
        cudaFuncSetAttribute(ring_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    time("ring",
         cat("W ", W, " seg ", seg / 1024, "K S ", S, " every ", every / 1024, "K",
             rows > 1 ? cat(" rows ", rows, " split ", split) : std::string()),
         smem, [&] {
           ring_kernel<<<grid, block, smem, c.stream>>>(buf, share, W, seg, S, rows, split, every,
                                                        probe, out);
         });
  }
  // {P, N, every}
  const std::vector<std::array<int, 3>> page_sets = {
      {8192, 16, 0},      {16384, 12, 0},      {32768, 6, 0},      {65536, 3, 0},
      {16384, 12, 65536}, {16384, 12, 196608}, {32768, 6, 196608}, {65536, 3, 196608}};
  for (const std::array<int, 3>& p : page_sets) {
    const int P = p[0], N = p[1], every = p[2];
    const size_t smem = size_t(P) * N;
    LOOM_CUDA_CHECK(
        cudaFuncSetAttribute(pages_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    time("pages", cat("P ", P / 1024, "K N ", N, " every ", every / 1024, "K"), smem, [&] {
      pages_kernel<<<grid, block, smem, c.stream>>>(buf, share, P, N, every, probe, out);
    });
  }
  time("ldg", "U 4", 0, [&] { ldg_kernel<4><<<grid, block, 0, c.stream>>>(buf, share, out); });
  time("ldg", "U 8", 0, [&] { ldg_kernel<8><<<grid, block, 0, c.stream>>>(buf, share, out); });
  time("ldg", "U 16", 0, [&] { ldg_kernel<16><<<grid, block, 0, c.stream>>>(buf, share, out); });
  LOOM_CUDA_CHECK(cudaEventDestroy(e0));
  LOOM_CUDA_CHECK(cudaEventDestroy(e1));
  LOOM_CUDA_CHECK(cudaFree(buf));
  LOOM_CUDA_CHECK(cudaFree(out));
  LOOM_CUDA_CHECK(cudaFree(probe));
  return {{"bytes_per_launch", double(share) * c.sms}, {"ctas", c.sms}, {"rows", rows}};
}

}  // namespace loom::bench
