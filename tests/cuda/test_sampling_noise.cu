// Over all 2^23 uniforms the Philox stream produces (core/philox.h as the device compiles it):
// the device's uniform_from_bits equals the host's, and the device draw's noise estimate
// (gumbel_noise_estimate: a series and the fast log) is within kGumbelEstimateErr of the exact fp64
// noise, the bound kernels/sampling.cu's pruning relies on. Over every fp32 u in [0, 40), the
// device's top-p quantum (core/top_p_weight.h) equals floor(u · 4096) as the host converts it.
#include <doctest/doctest.h>

#include <array>

#include "core/philox.h"
#include "core/top_p_weight.h"
#include "cuda/cuda_test_util.h"

using namespace loom;
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
