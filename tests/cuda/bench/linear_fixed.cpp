// linear_fixed (kernels/linear_fixed.cuh, the batch-invariant linear layer) vs cuBLAS on the
// decode and prefill shapes, m 1 to 1746, each validated against cpu::matmul_nt, and from m = 32
// each of its kernels forced ("linear_fixed paths": the data behind its choice by shape,
// pick_path in kernels/linear_fixed.cu).
#include <algorithm>
#include <cstdio>

#include "bench.h"
#include "kernels/activation.cuh"
#include "kernels/linear_fixed.cuh"

namespace loom::bench {

using json = nlohmann::json;

namespace {

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
  {  // validate: once on the first weight copy (the timed calls rotate through the copies)
    gpu::LinearFixedArgs a;
    a.x = x;
    a.w = w;
    a.y = y;
    a.m = m;
    a.n = n;
    a.k = k;
    LOOM_KERNEL(gpu::linear_fixed(a, stream));
  }
  const double err = linear_rel_err(x, w, y, DType::BF16, m, n, k, n);
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
          {"tile192_us", tile192},
          {"rel_err", err}};
}

}  // namespace

json bench_linear_fixed(const Context& c) {
  gpu::Gemm& gemm = *c.gemm;
  cudaStream_t stream = c.stream;
  json lf = json::array();
  std::printf("\n%-22s %5s %10s %10s %9s %9s %8s %8s\n", "linear_fixed vs cuBLAS", "m", "fixed us",
              "cublas us", "fix GB/s", "cub GB/s", "fix TF/s", "cub TF/s");
  for (auto [n, k] : std::vector<std::pair<int, int>>{
           {2560, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}, {262145, 2048}})
    for (int m : {1, 4, 8, 32, 64, 128, 256, 512, 1746}) {
      if (n == 262145 && m > 256) continue;  // lm_head: only the sampled rows
      const json e = linear_fixed_vs_cublas(gemm, stream, m, n, k);
      lf.push_back(e);
      std::printf("[%d,%d]x[%d,%d]T %5d %10.1f %10.1f %9.0f %9.0f %8.1f %8.1f  %s\n", m, k, n, k, m,
                  e["fixed_us"].get<double>(), e["cublas_us"].get<double>(),
                  e["fixed_gbps"].get<double>(), e["cublas_gbps"].get<double>(),
                  e["fixed_tflops"].get<double>(), e["cublas_tflops"].get<double>(),
                  e["rel_err"].get<double>() < 1e-2 ? "valid" : "INVALID");
    }
  std::printf("\n%-22s %5s %10s %10s %10s %10s %10s  (us; same bits)\n", "linear_fixed paths", "m",
              "auto", "rows", "tile64", "tile128", "tile192");
  for (const json& e : lf)
    if (e["m"].get<int>() >= 32)
      std::printf("[%d,%d]x[%d,%d]T %5d %10.1f %10.1f %10.1f %10.1f %10.1f\n", e["m"].get<int>(),
                  e["k"].get<int>(), e["n"].get<int>(), e["k"].get<int>(), e["m"].get<int>(),
                  e["fixed_us"].get<double>(), e["rows_us"].get<double>(),
                  e["tile64_us"].get<double>(), e["tile128_us"].get<double>(),
                  e["tile192_us"].get<double>());
  return lf;
}

}  // namespace loom::bench
