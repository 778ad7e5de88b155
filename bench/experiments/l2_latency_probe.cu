// What an L2 hit costs while HBM streams (bench/NOTES-cuda.md, session 62): the megakernel's
// stagings are one L2 read each and take 2-5 µs on its critical path where an idle L2 answers in
// under 1 µs. Is the wait behind the same SM's own bulk copies in flight (then issue order on
// the SM decides) or behind the whole GPU's (then only less in flight anywhere helps)?
//
// One CTA an SM, 16 warps. Warps 0-14 of a streaming CTA stream 4 KB bulk copies from a 2 GB
// buffer (evict_first, as the megakernel's weights) through a ring of `depth` slots a warp;
// warp 15's lane 0 chases pointers through a 256 KB array that stays in the L2 (ld.global.cg,
// each load's address from the last), so its mean time a load is an L2 hit's latency there.
// Scenarios (each 4 ms): nobody streams; every CTA streams at depth 1-3; half the CTAs stream
// at depth 3 and the probes of both halves are reported apart (same GPU-wide load, with and
// without the SM's own copies in flight).
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a l2_latency_probe.cu -o l2_probe
//   ./l2_probe            (prints a table; JSON with --json FILE)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,                  \
                   cudaGetErrorString(e));                                            \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

constexpr int kThreads = 512, kWarps = 16, kStreamWarps = 15, kSeg = 4096, kMaxDepth = 3;

struct CtaResult {
  unsigned long long bytes, loads, probe_ns, span_ns;
};

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t su32(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

__global__ void __launch_bounds__(kThreads, 1)
    probe(const char* big, size_t big_bytes, const uint32_t* chase, int depth, int stream_ctas,
          uint64_t duration_ns, CtaResult* out) {
  extern __shared__ __align__(128) char ring[];  // [15 warps][depth][4 KB]
  __shared__ uint64_t bar[kStreamWarps][kMaxDepth];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool streams = int(blockIdx.x) < stream_ctas && depth > 0;
  if (threadIdx.x < kStreamWarps * kMaxDepth) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(su32(&bar[0][0] + threadIdx.x)));
  }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  const uint64_t t0 = now_ns(), t_end = t0 + duration_ns;
  if (warp < kStreamWarps && lane == 0 && streams) {
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    // This warp's region: big_bytes / (gridDim · 15) bytes, walked in order and wrapped.
    const size_t region = big_bytes / (size_t(gridDim.x) * kStreamWarps) / kSeg * kSeg;
    const char* base = big + (size_t(blockIdx.x) * kStreamWarps + warp) * region;
    uint32_t issued = 0, consumed = 0;
    unsigned long long bytes = 0;
    for (;;) {
      const bool more = now_ns() < t_end;
      while (more && issued - consumed < uint32_t(depth)) {
        const int s = issued % depth;
        uint64_t* b = &bar[warp][s];
        char* dst = ring + (size_t(warp) * depth + s) * kSeg;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(su32(b)),
                     "r"(kSeg)
                     : "memory");
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
            "[%0], [%1], %2, [%3], %4;" ::"r"(su32(dst)),
            "l"(base + (size_t(issued) * kSeg) % region), "r"(kSeg), "r"(su32(b)), "l"(policy)
            : "memory");
        issued++;
      }
      if (consumed == issued) break;
      const int s = consumed % depth;
      const uint32_t parity = (consumed / depth) & 1;
      uint32_t done = 0;
      while (!done)
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, "
            "1, 0, p; }"
            : "=r"(done)
            : "r"(su32(&bar[warp][s])), "r"(parity)
            : "memory");
      consumed++;
      bytes += kSeg;
    }
    atomicAdd(&out[blockIdx.x].bytes, bytes);
  }
  if (warp == kWarps - 1 && lane == 0) {
    // A first walk puts the chase in the L2; then dependent loads until the time is up.
    uint32_t i = 0;
    for (int k = 0; k < 2048; k++) i = __ldcg(chase + i);
    unsigned long long loads = 0;
    const uint64_t p0 = now_ns();
    uint64_t p1 = p0;
    while (p1 < t_end) {
#pragma unroll 1
      for (int k = 0; k < 16; k++) i = __ldcg(chase + i);
      loads += 16;
      p1 = now_ns();
    }
    out[blockIdx.x].loads = loads + (i == 0xFFFFFFFFu);  // (keeps the chain live)
    out[blockIdx.x].probe_ns = p1 - p0;
  }
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x].span_ns = now_ns() - t0;
}

int main(int argc, char** argv) {
  const char* json = argc > 2 && std::string(argv[1]) == "--json" ? argv[2] : nullptr;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int ctas = prop.multiProcessorCount;
  const size_t big_bytes = size_t(2) << 30;
  char* big = nullptr;
  CHECK(cudaMalloc(&big, big_bytes));
  CHECK(cudaMemset(big, 1, big_bytes));
  // A random cycle over 64K entries (256 KB), stepping 32 entries (128 bytes) a hop so each load
  // is its own line.
  const int n = 65536, lines = n / 32;
  std::vector<uint32_t> perm(lines), chase(n, 0);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin() + 1, perm.end(), std::mt19937(7));
  for (int k = 0; k < lines; k++) chase[perm[k] * 32] = perm[(k + 1) % lines] * 32;
  uint32_t* d_chase = nullptr;
  CHECK(cudaMalloc(&d_chase, n * 4));
  CHECK(cudaMemcpy(d_chase, chase.data(), n * 4, cudaMemcpyHostToDevice));
  CtaResult* d_out = nullptr;
  CHECK(cudaMalloc(&d_out, ctas * sizeof(CtaResult)));
  CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kStreamWarps * kMaxDepth * kSeg));
  struct Case {
    const char* name;
    int depth, stream_ctas;
  };
  const Case cases[] = {{"idle", 0, 0},
                        {"all stream, depth 1", 1, ctas},
                        {"all stream, depth 2", 2, ctas},
                        {"all stream, depth 3", 3, ctas},
                        {"half stream, depth 3", 3, ctas / 2},
                        {"half stream, depth 1", 1, ctas / 2},
                        {"idle", 0, 0}};
  FILE* jf = json ? std::fopen(json, "w") : nullptr;
  if (jf) std::fprintf(jf, "{\"gpu\": \"%s\", \"cases\": [\n", prop.name);
  std::printf("%s, %d SMs; 4 ms a case\n", prop.name, ctas);
  std::printf("%-24s %10s %18s %18s\n", "case", "HBM GB/s", "L2 hit ns (stream)",
              "L2 hit ns (idle SM)");
  bool first = true;
  for (const Case& c : cases) {
    for (int rep = 0; rep < 2; rep++) {
      CHECK(cudaMemset(d_out, 0, ctas * sizeof(CtaResult)));
      probe<<<ctas, kThreads, kStreamWarps * std::max(c.depth, 1) * kSeg>>>(
          big, big_bytes, d_chase, c.depth, c.stream_ctas, 4000000ull, d_out);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      std::vector<CtaResult> r(ctas);
      CHECK(cudaMemcpy(r.data(), d_out, ctas * sizeof(CtaResult), cudaMemcpyDeviceToHost));
      double bytes = 0, span = 0, lat_s = 0, lat_i = 0;
      int ns = 0, ni = 0;
      for (int b = 0; b < ctas; b++) {
        bytes += double(r[b].bytes);
        span = std::max(span, double(r[b].span_ns));
        const double lat = double(r[b].probe_ns) / double(std::max(1ull, r[b].loads));
        if (b < c.stream_ctas && c.depth > 0)
          lat_s += lat, ns++;
        else
          lat_i += lat, ni++;
      }
      const double gbps = bytes / span;  // bytes / ns = GB/s
      std::printf("%-24s %10.0f %18.0f %18.0f\n", c.name, gbps, ns ? lat_s / ns : 0.0,
                  ni ? lat_i / ni : 0.0);
      if (jf)
        std::fprintf(jf,
                     "%s{\"case\": \"%s\", \"rep\": %d, \"depth\": %d, \"stream_ctas\": %d, "
                     "\"hbm_gbps\": %.1f, \"l2_hit_ns_streaming_sm\": %.1f, "
                     "\"l2_hit_ns_idle_sm\": %.1f}",
                     first ? "" : ",\n", c.name, rep, c.depth, c.stream_ctas, gbps,
                     ns ? lat_s / ns : 0.0, ni ? lat_i / ni : 0.0);
      first = false;
    }
  }
  if (jf) std::fprintf(jf, "\n]}\n"), std::fclose(jf);
  return 0;
}
