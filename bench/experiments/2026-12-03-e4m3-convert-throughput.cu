// A probe for session 41, not part of the build: is the hardware e4m3 -> f16 conversion what
// limits the FP8 decode kernel, and would plain bit operations give the same mma inputs?
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/e4m3cvt \
//     bench/experiments/2026-12-03-e4m3-convert-throughput.cu && /tmp/e4m3cvt
//
// The TMA decode kernel's V fragments (attention_swap.cuh) take a 32-bit word of 4 e4m3 bytes
// apart as __byte_perm(q, 0, 0x0020) and 0x0031 (bytes 0, 2 and 1, 3), each pair through one
// cvt.rn.f16x2.e4m3x2. The same two f16x2 words, scaled by 2^-8, are bit operations: an e4m3
// byte SEEEEMMM placed in the high byte of a 16-bit half and its magnitude shifted right once
// reads as the f16 0 0EEEE MMM0000000 = 2^(E-15) 1.M (or 2^-14 0.M for E = 0: e4m3's
// subnormals 2^-6 0.M, also scaled by 2^-8), i.e. exactly the e4m3 value times 2^-8 for every
// byte but e4m3's NaN (0x7f, 0xff: 480 · 2^-8 here). The kernel could fold the 2^8 into its
// softmax scale (K) and V scale: a power of two commutes with every fp32 rounding that does not
// leave the normal range, so the bits would stay. Whether it pays depends on the conversion's
// rate: a word's two f16x2 are 2 PRMT + 2 F2FP today and ~7 integer instructions by bits. This
// probe measures both, and checks the identity on the GPU for all 65,536 byte pairs.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstdio>

__device__ __forceinline__ uint32_t cvt_pair(uint32_t two) {  // the kernel's e4m3x2_to_f16x2
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}
// Bytes 1 and 3 of q as f16x2 (low half byte 1), times 2^-8.
__device__ __forceinline__ uint32_t odd_bytes_scaled(uint32_t q) {
  return (q & 0x80008000u) | ((q >> 1) & 0x3f803f80u);
}
// Bytes 0 and 2 of q as f16x2 (low half byte 0), times 2^-8.
__device__ __forceinline__ uint32_t even_bytes_scaled(uint32_t q) {
  return odd_bytes_scaled(q << 8);
}

// Every 16-bit pair (bytes b0 | b1 << 8 placed as bytes 0 and 2 of a word): bit path times 256
// against cvt. Counts mismatches outside e4m3's NaN codes, and NaN codes that match.
__global__ void check_identity(unsigned* bad, unsigned* nan_seen) {
  const uint32_t v = blockIdx.x * blockDim.x + threadIdx.x;  // 0 .. 65535
  if (v >= 65536) return;
  const uint32_t b0 = v & 0xff, b1 = v >> 8;
  const uint32_t word = b0 | (b1 << 16);  // bytes 0 and 2
  const uint32_t ref = cvt_pair(__byte_perm(word, 0, 0x0020));
  const uint32_t bits = even_bytes_scaled(word);
  const __half2 scaled = __hmul2(*reinterpret_cast<const __half2*>(&bits), __float2half2_rn(256.f));
  const uint32_t got = *reinterpret_cast<const uint32_t*>(&scaled);
  const bool nan = (b0 & 0x7f) == 0x7f || (b1 & 0x7f) == 0x7f;
  if (nan)
    atomicAdd(nan_seen, 1u);
  else if (got != ref)
    atomicAdd(bad, 1u);
}

// Throughput: each thread converts kIters words held in registers, eight independent chains,
// the two f16x2 results folded into the chain so nothing is dead. Mode 0: the kernel's
// __byte_perm + cvt; 1: the bit path; 2: the bit path and one HMUL2 by 256 a result.
template <int kMode>
__global__ void convert_rate(uint32_t seed, int iters, uint32_t* sink) {
  uint32_t x[8];
#pragma unroll
  for (int j = 0; j < 8; j++) x[j] = seed * (threadIdx.x + 8 * j + 1) | 0x01010101u;
  for (int it = 0; it < iters; it++) {
#pragma unroll
    for (int j = 0; j < 8; j++) {
      uint32_t a, b;
      if constexpr (kMode == 0) {
        a = cvt_pair(__byte_perm(x[j], 0, 0x0020));
        b = cvt_pair(__byte_perm(x[j], 0, 0x0031));
      } else {
        a = even_bytes_scaled(x[j]);
        b = odd_bytes_scaled(x[j]);
        if constexpr (kMode == 2) {
          const __half2 k = __float2half2_rn(256.f);
          __half2 ha = __hmul2(*reinterpret_cast<__half2*>(&a), k);
          __half2 hb = __hmul2(*reinterpret_cast<__half2*>(&b), k);
          a = *reinterpret_cast<uint32_t*>(&ha);
          b = *reinterpret_cast<uint32_t*>(&hb);
        }
      }
      x[j] = (a ^ b) + 0x01010101u * uint32_t(j + 1);  // keep the bytes moving
    }
  }
  uint32_t s = 0;
#pragma unroll
  for (int j = 0; j < 8; j++) s ^= x[j];
  if (s == 0x12345678u) sink[threadIdx.x] = s;
}

template <int kMode>
static float time_mode(int blocks, int threads, int iters, uint32_t* sink) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  convert_rate<kMode><<<blocks, threads>>>(7u, iters, sink);  // warm-up
  float best = 1e30f;
  for (int r = 0; r < 5; r++) {
    cudaEventRecord(e0);
    convert_rate<kMode><<<blocks, threads>>>(7u + r, iters, sink);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    best = ms < best ? ms : best;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return best;
}

int main() {
  unsigned *bad, *nan_seen;
  uint32_t* sink;
  cudaMalloc(&bad, 4);
  cudaMalloc(&nan_seen, 4);
  cudaMalloc(&sink, 4096);
  cudaMemset(bad, 0, 4);
  cudaMemset(nan_seen, 0, 4);
  check_identity<<<256, 256>>>(bad, nan_seen);
  unsigned h_bad = 0, h_nan = 0;
  cudaMemcpy(&h_bad, bad, 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(&h_nan, nan_seen, 4, cudaMemcpyDeviceToHost);
  std::printf("identity: %u of %u non-NaN pairs differ (%u pairs hold a NaN code)\n", h_bad,
              65536u - h_nan, h_nan);

  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int threads = 256, blocks = sms * 8, iters = 4096;
  const double words = double(blocks) * threads * iters * 8;  // 4 e4m3 values each
  const char* names[3] = {"byte_perm + cvt (kernel today)", "bit path", "bit path + HMUL2"};
  float ms[3] = {time_mode<0>(blocks, threads, iters, sink),
                 time_mode<1>(blocks, threads, iters, sink),
                 time_mode<2>(blocks, threads, iters, sink)};
  for (int m = 0; m < 3; m++)
    std::printf("%-32s %8.3f ms  %7.1f e4m3 values / ns  %6.2f values / clk / SM at 1.98 GHz\n",
                names[m], ms[m], 4 * words / (ms[m] * 1e6),
                4 * words / (ms[m] * 1e-3) / 1.98e9 / sms);
  const cudaError_t err = cudaGetLastError();
  std::printf("cuda: %s\n", cudaGetErrorString(err));
  return err == cudaSuccess && h_bad == 0 ? 0 : 1;
}
