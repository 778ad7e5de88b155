// Would a split-K with its fold in the next kernel pay for the 256-row layer GEMMs? cuBLASLt's
// own split-K (gemm_algos.cpp) folds in a kernel or atomics of its own and lost at every shape;
// here the S slices of k run as one strided-batched GEMM with fp32 partials out (S × the CTAs,
// no fold), the fold being left to the elementwise kernel each GEMM already feeds (rope_kv_write,
// the residual RMSNorm, act_mul) at the cost of reading S fp32 partials instead of one bf16 row.
// Times, L2 flushed, the default GEMM (bf16 out) and the best heuristic algorithm at S = 1, 2, 4,
// 8, each checked against the default's output by summing its partials on the host.
#include <cublasLt.h>

#include <cstdio>

#include "bench.h"
#include "kernels/activation.cuh"
#include "kernels/cuda_check.cuh"

namespace loom::bench {

using json = nlohmann::json;

json bench_gemm_split_batched(const Context& c) {
  const LtSession lt;
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {
      {"qkv", 2560, 2048}, {"o", 2048, 2048}, {"gate_up", 11264, 2048}, {"down", 2048, 5632}};
  const int m = 256;
  json out = json::array();
  std::printf("\n%-8s %5s %11s %9s %9s %9s %9s  (us; fp32 partials out, S slices of k)\n", "gemm",
              "m", "default", "S 1", "S 2", "S 4", "S 8");
  for (const Shape& s : shapes) {
    Buffers b;
    void* w = b.alloc(size_t(s.n) * s.k * 2);  // [n, k] bf16
    void* x = b.alloc(size_t(m) * s.k * 2);    // [m, k] bf16
    void* y_ref = b.alloc(size_t(m) * s.n * 2);
    void* part = b.alloc(size_t(8) * m * s.n * 4);  // [S, m, n] fp32
    LOOM_KERNEL(gpu::fill_uniform(DType::BF16, w, size_t(s.n) * s.k, 3, 0.05f, nullptr));
    LOOM_KERNEL(gpu::fill_uniform(DType::BF16, x, size_t(m) * s.k, 4, 1.0f, nullptr));
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());
    const double def_us = time_us(
        c, [&] { c.gemm->run(DType::BF16, x, w, DType::BF16, y_ref, m, s.n, s.k, 0.0f, s.n); });
    const std::vector<float> ref = b.download(y_ref, size_t(4) * s.n, DType::BF16);
    json row = {{"gemm", s.name}, {"m", m}, {"n", s.n}, {"k", s.k}, {"default_us", def_us}};
    std::printf("%-8s %5d %11.1f", s.name, m, def_us);
    for (int split : {1, 2, 4, 8}) {
      const int ks = s.k / split;
      // part_s^T [n, m] = w_s (k/S x n, op T) · x_s^T: slice s of k at s · k/S elements in
      // both operands (rows of k), partial s at s · m · n.
      const int64_t part_stride = int64_t(m) * s.n;
      LtGemm g(m, s.n, ks, s.n, CUDA_R_32F, s.k);
      g.batch(split, ks, ks, part_stride);
      const cublasLtMatmulDesc_t op = g.op;
      const cublasLtMatrixLayout_t la = g.w, lb = g.x, ly = g.y;
      cublasLtMatmulPreference_t pref = nullptr;
      LOOM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      LOOM_CUBLAS_CHECK(
          cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &LtSession::kWsBytes, sizeof LtSession::kWsBytes));
      cublasLtMatmulHeuristicResult_t res[16];
      int n_res = 0;
      cublasLtMatmulAlgoGetHeuristic(lt.lt, op, la, lb, ly, ly, pref, 16, res, &n_res);
      const float alpha = 1.0f, beta = 0.0f;
      auto matmul = [&](const cublasLtMatmulAlgo_t& algo) {
        LOOM_CUBLAS_CHECK(cublasLtMatmul(lt.lt, op, &alpha, w, la, x, lb, &beta, part, ly, part, ly,
                                         &algo, lt.ws, LtSession::kWsBytes, c.stream));
      };
      double best_us = 1e30;
      int best = -1;
      for (int i = 0; i < n_res; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        const double us = time_us(
            c, [&] { matmul(res[i].algo); }, 10, 2);
        if (us < best_us) best_us = us, best = i;
      }
      double err = INFINITY;
      if (best >= 0) {  // the partials' sum (rows 0-3) against the default's bf16 output
        matmul(res[best].algo);
        std::vector<float> sum(size_t(4) * s.n, 0.0f);
        for (int p = 0; p < split; p++) {
          const std::vector<float> v = b.download(
              static_cast<char*>(part) + size_t(p) * part_stride * 4, sum.size(), DType::F32);
          for (size_t e = 0; e < sum.size(); e++) sum[e] += v[e];
        }
        err = rel_err(sum, ref);
      }
      std::printf(" %8.1f%s", best_us, err < 1e-2 ? " " : "!");
      row[cat("s", split, "_us")] = best_us;
      row[cat("s", split, "_rel_err")] = err;
      row[cat("s", split, "_algos")] = n_res;
      cublasLtMatmulPreferenceDestroy(pref);
    }
    std::printf("\n");
    out.push_back(row);
  }
  std::printf("(! : partials' sum not within 1e-2 of the default's output)\n");
  return out;
}

}  // namespace loom::bench
