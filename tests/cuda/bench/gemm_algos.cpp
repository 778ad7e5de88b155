// Would autotuning the decode GEMMs pay? cuBLAS's default choice (cublasGemmEx, what
// gpu::Gemm::run calls) against every algorithm cuBLASLt's heuristic offers (up to 32) on Terra's
// layer GEMMs and lm_head at 64 and 256 rows, each timed with L2 flushed; the fastest is checked
// against the default's output. Prints the default, the best and the ratio per shape; at 256 rows
// also the best of the heuristic's algorithms with split-K (2..8) and each reduction scheme.
#include <cublasLt.h>

#include <cstdio>

#include "bench.h"
#include "kernels/activation.cuh"
#include "kernels/cuda_check.cuh"

namespace loom::bench {

using json = nlohmann::json;

json bench_gemm_algos(const Context& c) {
  const LtSession session;
  cublasLtHandle_t lt = session.lt;
  void* ws = session.ws;
  const size_t ws_bytes = LtSession::kWsBytes;
  struct Shape {
    const char* name;
    int n, k, ldy;
    DType out;
  };
  const Shape shapes[] = {{"qkv", 2560, 2048, 2560, DType::BF16},
                          {"o", 2048, 2048, 2048, DType::BF16},
                          {"gate_up", 11264, 2048, 11264, DType::BF16},
                          {"down", 2048, 5632, 2048, DType::BF16},
                          {"lm_head", 262145, 2048, 262208, DType::F32}};
  json out = json::array();
  std::printf("\n%-8s %5s %12s %12s %8s %6s\n", "gemm", "m", "default us", "best Lt us", "ratio",
              "algos");
  for (const Shape& s : shapes)
    for (int m : {64, 256}) {
      Buffers b;
      void* w = b.alloc(size_t(s.n) * s.k * 2);
      void* x = b.alloc(size_t(m) * s.k * 2);
      const size_t ybytes = size_t(m) * s.ldy * dtype_size(s.out);
      void* y = b.alloc(ybytes);
      void* y_ref = b.alloc(ybytes);
      LOOM_KERNEL(gpu::fill_uniform(DType::BF16, w, size_t(s.n) * s.k, 3, 0.05f, nullptr));
      LOOM_KERNEL(gpu::fill_uniform(DType::BF16, x, size_t(m) * s.k, 4, 1.0f, nullptr));
      LOOM_CUDA_CHECK(cudaDeviceSynchronize());
      const double def_us = time_us(
          c, [&] { c.gemm->run(DType::BF16, x, w, s.out, y_ref, m, s.n, s.k, 0.0f, s.ldy); });

      // The same product through cuBLASLt, column-major: y^T[n, m] = w[n, k] (k x n, op T) . x^T.
      const cudaDataType_t yt = s.out == DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
      const LtGemm g(m, s.n, s.k, s.ldy, yt);
      const cublasLtMatmulDesc_t op = g.op;
      const cublasLtMatrixLayout_t la = g.w, lb = g.x, ly = g.y;
      const std::vector<cublasLtMatmulHeuristicResult_t> res = lt_heuristics(lt, g, 32);
      const int n_res = int(res.size());
      const float alpha = 1.0f, beta = 0.0f;
      double best_us = 1e30;
      int best = -1;
      for (int i = 0; i < n_res; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        auto call = [&] {
          LOOM_CUBLAS_CHECK(cublasLtMatmul(lt, op, &alpha, w, la, x, lb, &beta, y, ly, y, ly,
                                           &res[i].algo, ws, ws_bytes, c.stream));
        };
        const double us = time_us(c, call, 10, 2);
        if (us < best_us) best_us = us, best = i;
      }
      double err = INFINITY;
      if (best >= 0) {
        LOOM_CUBLAS_CHECK(cublasLtMatmul(lt, op, &alpha, w, la, x, lb, &beta, y, ly, y, ly,
                                         &res[best].algo, ws, ws_bytes, c.stream));
        const size_t n_check = std::min<size_t>(size_t(s.ldy) * 4, size_t(m) * s.ldy);
        err = rel_err(b.download(y, n_check, s.out), b.download(y_ref, n_check, s.out));
      }
      // Beyond the heuristic: each of its algorithms with split-K 2..8 and every reduction
      // scheme it supports (256 rows leave most SMs idle at these N), checked against the
      // default's output.
      json split_k = nullptr;
      if (m == 256 && s.out == DType::BF16) {
        double sk_us = 1e30;
        std::string sk_desc;
        int tried = 0, rejected = 0;
        for (int i = 0; i < n_res; i++) {
          if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
          const cublasLtMatmulAlgo_t& h = res[i].algo;
          if (i == best)
            std::printf(
                "%-8s %5d heuristic's best: algo %u tile %u stages %u splitK %u "
                "reduction %u swizzle %u custom %u cluster %u\n",
                s.name, m, lt_config(h, CUBLASLT_ALGO_CONFIG_ID),
                lt_config(h, CUBLASLT_ALGO_CONFIG_TILE_ID),
                lt_config(h, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                lt_config(h, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                lt_config(h, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                lt_config(h, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                lt_config(h, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
                lt_config(h, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
          uint32_t schemes = 0;
          size_t sz = 0;
          cublasLtMatmulAlgoCapGetAttribute(&h, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes,
                                            sizeof schemes, &sz);
          for (uint32_t k : {2u, 3u, 4u, 6u, 8u})
            for (uint32_t scheme : {uint32_t(CUBLASLT_REDUCTION_SCHEME_INPLACE),
                                    uint32_t(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE),
                                    uint32_t(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)}) {
              if (!(schemes & scheme)) continue;
              cublasLtMatmulAlgo_t cfg = h;
              cublasLtMatmulAlgoConfigSetAttribute(&cfg, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &k, 4);
              cublasLtMatmulAlgoConfigSetAttribute(&cfg, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                   &scheme, 4);
              cublasLtMatmulHeuristicResult_t chk{};
              if (cublasLtMatmulAlgoCheck(lt, op, la, lb, ly, ly, &cfg, &chk) !=
                      CUBLAS_STATUS_SUCCESS ||
                  chk.workspaceSize > ws_bytes) {
                rejected++;
                continue;
              }
              tried++;
              auto call = [&] {
                LOOM_CUBLAS_CHECK(cublasLtMatmul(lt, op, &alpha, w, la, x, lb, &beta, y, ly, y, ly,
                                                 &cfg, ws, ws_bytes, c.stream));
              };
              const double us = time_us(c, call, 10, 2);
              if (!(us < sk_us)) continue;
              call();
              const size_t n_check = std::min<size_t>(size_t(s.ldy) * 4, size_t(m) * s.ldy);
              if (!(rel_err(b.download(y, n_check, s.out), b.download(y_ref, n_check, s.out)) <
                    1e-2))
                continue;
              sk_us = us;
              sk_desc = cat("heuristic ", i, " splitK ", k, " reduction ", scheme);
            }
        }
        std::printf(
            "%-8s %5d split-K: best %.1f us (%s) of %d configurations (%d rejected); "
            "x%.2f the default\n",
            s.name, m, sk_us, sk_desc.c_str(), tried, rejected, def_us / sk_us);
        split_k = {{"best_us", sk_us}, {"best", sk_desc}, {"tried", tried}};
      }
      std::printf("%-8s %5d %12.1f %12.1f %8.2f %6d  %s\n", s.name, m, def_us, best_us,
                  def_us / best_us, n_res, err < 1e-2 ? "valid" : "INVALID");
      out.push_back({{"gemm", s.name},
                     {"m", m},
                     {"n", s.n},
                     {"k", s.k},
                     {"default_us", def_us},
                     {"best_lt_us", best_us},
                     {"algos", n_res},
                     {"rel_err", err},
                     {"split_k", split_k}});
    }
  return out;
}

}  // namespace loom::bench
