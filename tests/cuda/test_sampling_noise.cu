// Over all 2^23 uniforms the Philox stream produces (core/philox.h as the device compiles it):
// the device's uniform_from_bits equals the host's, and the device draw's noise estimate
// (gumbel_noise_estimate: a series and the fast log) is within kGumbelEstimateErr of the exact fp64
// noise, the bound kernels/sampling.cu's pruning relies on. Over every fp32 u in [0, 40), the
// device's top-p quantum (core/top_p_weight.h) equals floor(u · 4096) as the host converts it,
// and over every difference from zmax the count pass's quantum equals it; over every x, the fp32
// filter's hoisted division (kernels/sample_bins.cuh) gives x / t's z, or its quantum, where the
// filter takes it.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <vector>

#include "core/philox.h"
#include "core/top_p_weight.h"
#include "cuda/cuda_test_util.h"
#include "kernels/sample_bins.cuh"

using namespace loom;
using namespace loom::gpu;
using namespace loom::test;

// err[k] = |estimate(u_k) - exact(u_k)| for u_k = (k + 0.5) / 2^23.
__global__ void noise_error_kernel(float* err) {
  const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= (1u << 23)) return;
  const float u = (float(k) + 0.5f) * (1.0f / 8388608.0f);
  err[k] = float(fabs(double(gumbel_noise_estimate(u)) - double(gumbel_noise(u))));
}

constexpr size_t kUniforms = size_t(1) << 23;

// kernel's output for k < 2^23 (one thread a k), on the host.
static std::vector<float> over_all_uniforms(void (*kernel)(float*)) {
  DevBuf d(kUniforms * 4);
  kernel<<<unsigned(kUniforms / 256), 256>>>(d.as<float>());
  LOOM_CUDA_CHECK(cudaGetLastError());
  std::vector<float> out(kUniforms);
  LOOM_CUDA_CHECK(cudaMemcpy(out.data(), d.get(), kUniforms * 4, cudaMemcpyDeviceToHost));
  return out;
}

TEST_CASE("device gumbel_noise_estimate is within kGumbelEstimateErr for every uniform") {
  const size_t n = kUniforms;
  const std::vector<float> err = over_all_uniforms(noise_error_kernel);
  size_t worst = 0;
  for (size_t k = 1; k < n; k++)
    if (err[k] > err[worst]) worst = k;
  CAPTURE(worst);
  MESSAGE("largest |estimate - exact| on the device: ", err[worst]);
  CHECK(err[worst] <= kGumbelEstimateErr);
  CHECK(err[worst] > 0.0f);
}

// u[k] = the device's uniform_from_bits of a word whose top 23 bits are k.
__global__ void uniform_kernel(float* u) {
  const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < (1u << 23)) u[k] = uniform_from_bits((k << 9) | (k & 511u));
}

TEST_CASE("the device's uniform from Philox bits equals the host's for every 23-bit value") {
  const size_t n = kUniforms;
  const std::vector<float> u = over_all_uniforms(uniform_kernel);
  size_t differ = 0;
  for (uint32_t k = 0; k < n; k++) differ += u[k] != uniform_from_bits((k << 9) | (k & 511u));
  CHECK(differ == 0);
  CHECK(u[0] == 0.5f / 8388608.0f);
  CHECK(u[n - 1] == 1.0f - 1.0f / 16777216.0f);
}

// The pair a checking kernel counts into, zeroed before launch(bad) and read after: bad[0] the
// inputs that fail the check, bad[1] one of them.
template <class Launch>
static std::array<unsigned long long, 2> mismatches(Launch launch) {
  DevBuf d(16);
  LOOM_CUDA_CHECK(cudaMemset(d.get(), 0, 16));
  launch(d.as<unsigned long long>());
  LOOM_CUDA_CHECK(cudaGetLastError());
  std::array<unsigned long long, 2> bad{};
  LOOM_CUDA_CHECK(cudaMemcpy(bad.data(), d.get(), 16, cudaMemcpyDeviceToHost));
  return bad;
}

// bad[0] += 1 for each u = the float with bits b, b < bits(40), whose device quantum differs from
// the conversion the host makes (uint32_t(u * 4096): F2I on the device); bad[1] = a b that does.
__global__ void quantum_kernel(unsigned long long* bad, uint32_t limit) {
  const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= limit) return;
  const float u = __uint_as_float(b);
  if (top_p_quantum_of_u(u) != uint32_t(u * 4096.0f)) {
    atomicAdd(&bad[0], 1ull);
    bad[1] = b;
  }
}

TEST_CASE("the device's top-p quantum equals the host's conversion for every u in [0, 40)") {
  const uint32_t limit = 0x42200000u;  // the bits of 40.0f: every u below it
  const auto bad = mismatches(
      [&](unsigned long long* b) { quantum_kernel<<<(limit + 255) / 256, 256>>>(b, limit); });
  CAPTURE(bad[1]);
  CHECK(bad[0] == 0u);
  // The host's, at the ends the fixed point is built on.
  CHECK(top_p_quantum_of_u(0.0f) == 0u);
  CHECK(top_p_quantum_of_u(1.0f / 4096.0f) == 1u);
  CHECK(top_p_quantum_of_u(std::nextafter(40.0f, 0.0f)) == 163839u);
  CHECK(top_p_quantum_of_u(40.0f) == kTopPNoWeight);
}

// bad[0] += 1 for each difference d = zmax - z >= 0 (the float with bits b <= bits(+inf), and
// one NaN) whose count-pass quantum differs from top_p_quantum's (kTopPPastQuanta where that is
// kTopPNoWeight); bad[1] = a b that does. z = 0 and zmax = d make the difference d exactly.
__global__ void count_quantum_kernel(unsigned long long* bad, uint32_t limit) {
  const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b > limit) return;
  const float d = b == limit ? __uint_as_float(0x7fc00000u) : __uint_as_float(b);
  const uint32_t q = top_p_quantum(0.0f, d);
  if (top_p_count_quantum(0.0f, d) != (q == kTopPNoWeight ? kTopPPastQuanta : q)) {
    atomicAdd(&bad[0], 1ull);
    bad[1] = b;
  }
}

TEST_CASE("the device's count-pass quantum equals top_p_quantum for every difference from zmax") {
  const uint32_t limit = 0x7f800001u;  // every d from +0 to +inf, then a NaN
  const auto bad = mismatches(
      [&](unsigned long long* b) { count_quantum_kernel<<<(limit + 256) / 256, 256>>>(b, limit); });
  CAPTURE(bad[1]);
  CHECK(bad[0] == 0u);
}

// bad[2 i] += 1 for each x with |x| in [2^-100, 2^100] (biased exponents 27 .. 227, both signs)
// whose QuotientOf(t[i]) differs from x / t[i] in any bit; bad[2 i + 1] = such an x's bits.
__global__ void quotient_kernel(const float* t, unsigned long long* bad) {
  constexpr uint64_t kXs = 2ull * 201ull << 23;
  const float ti = t[blockIdx.y];
  const QuotientOf z_of(ti);
  for (uint64_t k = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; k < kXs;
       k += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t e = uint32_t(k >> 23);  // sign e / 201, biased exponent 27 + e % 201
    const uint32_t bits = (e / 201u) << 31 | (27u + e % 201u) << 23 | uint32_t(k & 0x7fffffu);
    const float x = __uint_as_float(bits);
    if (__float_as_uint(z_of(x)) != __float_as_uint(x / ti)) {
      atomicAdd(&bad[2 * blockIdx.y], 1ull);
      bad[2 * blockIdx.y + 1] = bits;
    }
  }
}

// t for the checks below: t with every significand bit set (where one Newton step from a
// reciprocal off by an ulp lands on a power of two), their neighbours, usual temperatures, the
// range's ends, and 32 spread over it.
static std::vector<float> quotient_temperatures() {
  std::vector<float> t = {0.9f, 0.7f, 0.6f, 1.1f, 1.3f, 1.0f / 3.0f, 3.7f, 0x1.000002p0f,
                          0x1.000002p-20f, 0x1.fffffep19f, 0x1.8p-20f, 0x1.8p19f};
  for (int e = -20; e < 20; e += 3) t.push_back(std::ldexp(0x1.fffffep0f, e));
  uint32_t s = 12345u;
  for (int i = 0; i < 32; i++) {
    s = s * 1664525u + 1013904223u;
    t.push_back(std::ldexp(1.0f + float(s >> 9) * 0x1p-23f, int(s % 40u) - 20));
  }
  return t;
}

TEST_CASE("the filter's hoisted division gives x / t for every |x| in [2^-100, 2^100]") {
  const std::vector<float> t = quotient_temperatures();
  DevBuf dt(t.size() * 4), d(t.size() * 16);
  LOOM_CUDA_CHECK(cudaMemcpy(dt.get(), t.data(), t.size() * 4, cudaMemcpyHostToDevice));
  LOOM_CUDA_CHECK(cudaMemset(d.get(), 0, t.size() * 16));
  quotient_kernel<<<dim3(4096, unsigned(t.size())), 256>>>(dt.as<float>(),
                                                            d.as<unsigned long long>());
  LOOM_CUDA_CHECK(cudaGetLastError());
  std::vector<unsigned long long> bad(t.size() * 2);
  LOOM_CUDA_CHECK(cudaMemcpy(bad.data(), d.get(), t.size() * 16, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < t.size(); i++) {
    CAPTURE(t[i]);
    CAPTURE(bad[2 * i + 1]);
    CHECK(bad[2 * i] == 0u);
  }
}

// For row i (t[i], xmax[i]): out[3 i] = 1 where hoisted_quotient_fits takes the row, out[3 i + 1]
// += 1 for each x <= xmax[i] or NaN (every bit pattern) whose count-pass quantum differs between
// QuotientOf and x / t; out[3 i + 2] = such an x's bits.
__global__ void quotient_quantum_kernel(const float* t, const float* xmax,
                                        unsigned long long* out) {
  const float ti = t[blockIdx.y], xm = xmax[blockIdx.y], zmax = xm / ti;
  const QuotientOf z_of(ti);
  unsigned long long* o = out + 3 * blockIdx.y;
  if (blockIdx.x == 0 && threadIdx.x == 0) o[0] = hoisted_quotient_fits(ti, xm, zmax) ? 1u : 0u;
  for (uint64_t k = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; k < (1ull << 32);
       k += uint64_t(gridDim.x) * blockDim.x) {
    const float x = __uint_as_float(uint32_t(k));
    if (!(x <= xm) && !isnan(x)) continue;
    if (top_p_count_biased(z_of(x), zmax) != top_p_count_biased(x / ti, zmax)) {
      atomicAdd(&o[1], 1ull);
      o[2] = k;
    }
  }
}

TEST_CASE("rows the filter divides by its hoisted division keep every logit's top-p quantum") {
  // Each t with a largest logit at the ends hoisted_quotient_fits allows (|xmax| <= 2^99, |zmax|
  // >= 2^-40, just inside) and in between; the logits below it are every float.
  std::vector<float> t, xmax;
  for (const float ti : {0.9f, 0x1.fffffep-1f, 0x1.8p-20f, 0x1.8p19f, 0x1.fffffep-20f}) {
    std::vector<float> xs = {0x1p99f, -0x1p99f, 3.0f, -3.0f, 0x1p-10f};
    for (const float z : {0x1p-40f, -0x1p-40f}) {  // the smallest |xmax| with |xmax / t| >= z
      float x = z * ti;
      while (std::fabs(x / ti) < 0x1p-40f) x = std::nextafter(x, 2.0f * x);
      xs.push_back(x);
    }
    for (const float x : xs) t.push_back(ti), xmax.push_back(x);
  }
  const size_t n = t.size();
  DevBuf dt(n * 4), dx(n * 4), d(n * 24);
  LOOM_CUDA_CHECK(cudaMemcpy(dt.get(), t.data(), n * 4, cudaMemcpyHostToDevice));
  LOOM_CUDA_CHECK(cudaMemcpy(dx.get(), xmax.data(), n * 4, cudaMemcpyHostToDevice));
  LOOM_CUDA_CHECK(cudaMemset(d.get(), 0, n * 24));
  quotient_quantum_kernel<<<dim3(4096, unsigned(n)), 256>>>(dt.as<float>(), dx.as<float>(),
                                                            d.as<unsigned long long>());
  LOOM_CUDA_CHECK(cudaGetLastError());
  std::vector<unsigned long long> out(n * 3);
  LOOM_CUDA_CHECK(cudaMemcpy(out.data(), d.get(), n * 24, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++) {
    CAPTURE(t[i]);
    CAPTURE(xmax[i]);
    CAPTURE(out[3 * i + 2]);
    CHECK(out[3 * i] == 1u);
    CHECK(out[3 * i + 1] == 0u);
  }
}
