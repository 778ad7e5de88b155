// The activation family (kernels/activation.h): convert (every source f32, bf16, f16 to every
// destination f32, bf16) and fill_uniform (f32, bf16) against their host references, bit for bit
// (both round to nearest even and compute Philox alike), over odd sizes (1, 3, 19, 99, 2^20 + 3:
// more elements than the grid has threads). Outputs are poisoned with NaN before each run. The
// references' fixed values: ops/activation_ref.h.
#include <doctest/doctest.h>

#include <cstring>

#include "cuda/cuda_test_util.h"
#include "kernels/activation.cuh"
#include "ops/activation_ref.h"

using namespace loom;
using namespace loom::test;

namespace {

const size_t kSizes[] = {1, 3, 19, 99, (size_t(1) << 20) + 3};

// n values of dtype t (f32, bf16 or f16) as raw bytes, spanning several binades and signs.
std::vector<uint8_t> random_bytes(DType t, size_t n, uint64_t seed) {
  const std::vector<float> v = random_vec(n, seed, -300.0f, 300.0f);
  std::vector<uint8_t> b(n * dtype_size(t));
  for (size_t i = 0; i < n; i++) {
    const float x = v[i] * (i % 3 == 0 ? 1e-3f : 1.0f);
    if (t == DType::F32) std::memcpy(b.data() + 4 * i, &x, 4);
    const uint16_t h = t == DType::BF16 ? f32_to_bf16(x) : f32_to_f16(x);
    if (t != DType::F32) std::memcpy(b.data() + 2 * i, &h, 2);
  }
  return b;
}

DevBuf upload_bytes(const std::vector<uint8_t>& b) {
  DevBuf d(b.size());
  LOOM_CUDA_CHECK(cudaMemcpy(d.get(), b.data(), b.size(), cudaMemcpyHostToDevice));
  return d;
}

std::vector<uint8_t> download_bytes(const DevBuf& d, size_t bytes) {
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> b(bytes);
  LOOM_CUDA_CHECK(cudaMemcpy(b.data(), d.get(), bytes, cudaMemcpyDeviceToHost));
  return b;
}

}  // namespace

TEST_CASE("convert matches cpu::convert bit for bit for every dtype pair") {
  for (DType src_t : {DType::F32, DType::BF16, DType::F16})
    for (DType dst_t : {DType::F32, DType::BF16})
      for (size_t n : kSizes) {
        CAPTURE(dtype_name(src_t));
        CAPTURE(dtype_name(dst_t));
        CAPTURE(n);
        const std::vector<uint8_t> src = random_bytes(src_t, n, 51);
        std::vector<uint8_t> ref(n * dtype_size(dst_t));
        cpu::convert(src_t, src.data(), dst_t, ref.data(), n);
        DevBuf ds = upload_bytes(src), dd(ref.size());
        dd.poison();
        LOOM_KERNEL(gpu::convert(src_t, ds.get(), dst_t, dd.get(), n, nullptr));
        CHECK(download_bytes(dd, ref.size()) == ref);
      }
  DevBuf d(16);
  const gpu::Status s = gpu::convert(DType::F32, d.get(), DType::F16, d.get(), 1, nullptr);
  CHECK(s.message == "convert (destination): dtype f16 (expected f32 or bf16)");
  CHECK(gpu::convert(DType::I32, d.get(), DType::F32, d.get(), 1, nullptr).message ==
        "convert (source): dtype i32 (expected f32 or bf16 or f16)");
}

TEST_CASE("fill_uniform matches cpu::fill_uniform bit for bit") {
  for (DType t : {DType::F32, DType::BF16, DType::F8E4M3})
    for (size_t n : kSizes)
      for (uint64_t seed : {0ull, 0x123456789abcull}) {
        CAPTURE(dtype_name(t));
        CAPTURE(n);
        CAPTURE(seed);
        std::vector<uint8_t> ref(n * dtype_size(t));
        cpu::fill_uniform(t, ref.data(), n, seed, 0.5f);
        DevBuf d(ref.size());
        d.poison();
        LOOM_KERNEL(gpu::fill_uniform(t, d.get(), n, seed, 0.5f, nullptr));
        CHECK(download_bytes(d, ref.size()) == ref);
      }
}
