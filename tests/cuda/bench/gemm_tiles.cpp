// Would another cuBLASLt configuration serve the 256-row decode GEMMs better than the default?
// At 256 rows Terra's layer GEMMs take ~45% of the bf16 ceiling: cuBLAS's default tiles leave
// most SMs idle (qkv: 40 tiles of 128 x 128 for 132 SMs). This searches every algorithm
// cuBLASLt has for the shape (cublasLtMatmulAlgoGetIds), each tile and stage count it supports,
// split-K 1 (no second pass), then the best few with each CTA swizzle, cluster shape and
// custom option; each candidate timed with L2 flushed, the winner checked against the default's
// output. Prints per shape the default, the best and its configuration.
#include <cublasLt.h>

#include <algorithm>
#include <cstdio>

#include "bench.h"
#include "kernels/activation.cuh"
#include "kernels/cuda_check.cuh"

namespace loom::bench {

using json = nlohmann::json;

namespace {

struct Config {
  int algo = 0;
  uint32_t tile = 0, stages = 0, swizzle = 0, custom = 0;
  uint16_t cluster = 0;
  double us = 1e30;
};

uint32_t cap_u32(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t at) {
  uint32_t v = 0;
  size_t sz = 0;
  cublasLtMatmulAlgoCapGetAttribute(&a, at, &v, sizeof v, &sz);
  return v;
}

std::vector<uint32_t> cap_list(const cublasLtMatmulAlgo_t& a,
                               cublasLtMatmulAlgoCapAttributes_t at) {
  size_t sz = 0;
  cublasLtMatmulAlgoCapGetAttribute(&a, at, nullptr, 0, &sz);
  std::vector<uint32_t> v(sz / sizeof(uint32_t));
  if (!v.empty()) cublasLtMatmulAlgoCapGetAttribute(&a, at, v.data(), sz, &sz);
  if (v.empty()) v.push_back(0);  // the algorithm has one (undefined) choice
  return v;
}

}  // namespace

json bench_gemm_tiles(const Context& c) {
  const LtSession session;
  cublasLtHandle_t lt = session.lt;
  void* ws = session.ws;
  const size_t ws_bytes = LtSession::kWsBytes;
  struct Shape {
    const char* name;
    int m, n, k, ldy;
  };
  // bf16 in and out, as the decode step runs them (lm_head: bf16 logits of the padded vocab).
  // (lm_head's bf16 logits at 256 rows already run at ~85% of the GEMM ceiling: not searched.)
  const Shape shapes[] = {{"qkv", 256, 2560, 2048, 2560},       {"o", 256, 2048, 2048, 2048},
                          {"gate_up", 256, 11264, 2048, 11264}, {"down", 256, 2048, 5632, 2048},
                          {"qkv", 262, 2560, 2048, 2560},       {"down", 262, 2048, 5632, 2048}};
  json out = json::array();
  for (const Shape& s : shapes) {
    Buffers b;
    void* w = b.alloc(size_t(s.n) * s.k * 2);
    void* x = b.alloc(size_t(s.m) * s.k * 2);
    const size_t ybytes = size_t(s.m) * s.ldy * 2;
    void* y = b.alloc(ybytes);
    void* y_ref = b.alloc(ybytes);
    LOOM_KERNEL(gpu::fill_uniform(DType::BF16, w, size_t(s.n) * s.k, 3, 0.05f, nullptr));
    LOOM_KERNEL(gpu::fill_uniform(DType::BF16, x, size_t(s.m) * s.k, 4, 1.0f, nullptr));
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());
    const double def_us = time_us(
        c, [&] { c.gemm->run(DType::BF16, x, w, DType::BF16, y_ref, s.m, s.n, s.k, 0.0f, s.ldy); });

    // Column-major: y^T[n, m] = w[n, k] (k x n, op T) . x^T[k, m].
    const LtGemm g(s.m, s.n, s.k, s.ldy, CUDA_R_16BF);
    const cublasLtMatmulDesc_t op = g.op;
    const cublasLtMatrixLayout_t la = g.w, lb = g.x, ly = g.y;
    const float alpha = 1.0f, beta = 0.0f;

    // A configuration starts from one of the heuristic's results for its algorithm (the sm90
    // kernels reject a bare cublasLtMatmulAlgoInit's defaults), else from cublasLtMatmulAlgoInit.
    const std::vector<cublasLtMatmulHeuristicResult_t> res = lt_heuristics(lt, g, 32);
    const int n_res = int(res.size());
    auto seed = [&](int algo, cublasLtMatmulAlgo_t& a) {
      for (int i = 0; i < n_res; i++)
        if (int(lt_config(res[i].algo, CUBLASLT_ALGO_CONFIG_ID)) == algo)
          return a = res[i].algo, true;
      return cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF,
                                    CUDA_R_16BF, CUDA_R_16BF, algo, &a) == CUBLAS_STATUS_SUCCESS;
    };
    auto make = [&](const Config& cf, cublasLtMatmulAlgo_t& a) {
      if (!seed(cf.algo, a)) return false;
      const uint32_t one = 1;
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &cf.tile, 4);
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &cf.stages, 4);
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, 4);
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &cf.swizzle, 4);
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &cf.custom, 4);
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cf.cluster,
                                           2);
      cublasLtMatmulHeuristicResult_t chk{};
      return cublasLtMatmulAlgoCheck(lt, op, la, lb, ly, ly, &a, &chk) == CUBLAS_STATUS_SUCCESS &&
             chk.workspaceSize <= ws_bytes;
    };
    // The heuristic's own choices, as they come (the default's neighbours).
    for (int i = 0; i < n_res; i++) {
      auto g = [&](cublasLtMatmulAlgoConfigAttributes_t at) { return lt_config(res[i].algo, at); };
      std::printf(
          "%-8s m %3d: heuristic %d: algo %u tile %u stages %u splitK %u cluster %u inner %u\n",
          s.name, s.m, i, g(CUBLASLT_ALGO_CONFIG_ID), g(CUBLASLT_ALGO_CONFIG_TILE_ID),
          g(CUBLASLT_ALGO_CONFIG_STAGES_ID), g(CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
          g(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), g(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID));
    }
    int tried = 0, rejected = 0;
    auto time_cfg = [&](Config& cf) {
      cublasLtMatmulAlgo_t a;
      if (!make(cf, a)) {
        rejected++;
        return false;
      }
      tried++;
      auto call = [&] {
        LOOM_CUBLAS_CHECK(cublasLtMatmul(lt, op, &alpha, w, la, x, lb, &beta, y, ly, y, ly, &a, ws,
                                         ws_bytes, c.stream));
      };
      // One launch first: a configuration 2x slower than the default is not worth 8 more.
      cf.us = time_us(c, call, 1, 1);
      if (cf.us < 2 * def_us) cf.us = time_us(c, call, 8, 2);
      return true;
    };

    int ids[256];
    int n_ids = 0;
    LOOM_CUBLAS_CHECK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF,
                                               CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, 256, ids,
                                               &n_ids));
    std::vector<Config> done;
    for (int i = 0; i < n_ids && tried < 1500; i++) {
      cublasLtMatmulAlgo_t a;
      if (!seed(ids[i], a)) continue;
      const int before = tried, rej = rejected;
      for (uint32_t tile : cap_list(a, CUBLASLT_ALGO_CAP_TILE_IDS))
        for (uint32_t stages : cap_list(a, CUBLASLT_ALGO_CAP_STAGES_IDS)) {
          Config cf{ids[i], tile, stages};
          if (time_cfg(cf)) done.push_back(cf);
        }
      std::printf("%-8s m %3d: algo %d: %d configurations, %d rejected\n", s.name, s.m, ids[i],
                  tried - before, rejected - rej);
    }
    std::sort(done.begin(), done.end(), [](auto& p, auto& q) { return p.us < q.us; });
    // The best few with every swizzle, cluster shape and custom option.
    std::vector<Config> more;
    for (size_t i = 0; i < std::min<size_t>(6, done.size()); i++) {
      cublasLtMatmulAlgo_t a;
      seed(done[i].algo, a);
      const uint32_t swz = cap_u32(a, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT);
      const uint32_t cmax = cap_u32(a, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX);
      for (uint32_t sw = 0; sw <= swz; sw++)
        for (uint32_t co = 0; co <= std::min<uint32_t>(cmax, 7); co++)
          for (uint16_t cl :
               {uint16_t(CUBLASLT_CLUSTER_SHAPE_AUTO), uint16_t(CUBLASLT_CLUSTER_SHAPE_1x1x1),
                uint16_t(CUBLASLT_CLUSTER_SHAPE_2x1x1), uint16_t(CUBLASLT_CLUSTER_SHAPE_1x2x1)}) {
            Config cf = done[i];
            cf.swizzle = sw, cf.custom = co, cf.cluster = cl;
            if (time_cfg(cf)) more.push_back(cf);
          }
    }
    done.insert(done.end(), more.begin(), more.end());
    std::sort(done.begin(), done.end(), [](auto& p, auto& q) { return p.us < q.us; });

    // The best five, re-timed with more launches and checked against the default's output.
    json top = json::array();
    for (size_t i = 0; i < std::min<size_t>(5, done.size()); i++) {
      Config cf = done[i];
      cublasLtMatmulAlgo_t a;
      make(cf, a);
      auto call = [&] {
        LOOM_CUBLAS_CHECK(cublasLtMatmul(lt, op, &alpha, w, la, x, lb, &beta, y, ly, y, ly, &a, ws,
                                         ws_bytes, c.stream));
      };
      cf.us = time_us(c, call, 30, 3);
      call();
      const size_t n_check = size_t(s.m) * s.ldy;
      const auto got = b.download(y, n_check, DType::BF16);
      const auto want = b.download(y_ref, n_check, DType::BF16);
      const bool same_bits = got == want;
      const double err = rel_err(got, want);
      std::printf(
          "%-8s m %3d: %7.1f us (default %7.1f, x%.2f) algo %d tile %u stages %u swizzle %u "
          "custom %u cluster %u; %s, rel err %.1e\n",
          s.name, s.m, cf.us, def_us, def_us / cf.us, cf.algo, cf.tile, cf.stages, cf.swizzle,
          cf.custom, unsigned(cf.cluster), same_bits ? "same bits" : "other bits", err);
      top.push_back({{"us", cf.us},
                     {"algo", cf.algo},
                     {"tile", cf.tile},
                     {"stages", cf.stages},
                     {"swizzle", cf.swizzle},
                     {"custom", cf.custom},
                     {"cluster", cf.cluster},
                     {"same_bits", same_bits},
                     {"rel_err", err}});
    }
    const double tflops = 2.0 * s.m * s.n * s.k / (def_us * 1e6);
    std::printf("%-8s m %3d: default %.1f us (%.0f TFLOP/s), %d configurations (%d rejected)\n",
                s.name, s.m, def_us, tflops, tried, rejected);
    out.push_back({{"gemm", s.name},
                   {"m", s.m},
                   {"n", s.n},
                   {"k", s.k},
                   {"default_us", def_us},
                   {"tried", tried},
                   {"top", top}});
  }
  return out;
}

}  // namespace loom::bench
