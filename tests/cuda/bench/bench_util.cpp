#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <utility>

#include "bench.h"
#include "kernels/cuda_check.cuh"

namespace loom::bench {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<double> event_times_ms(cudaStream_t s, int iters, int warm,
                                   const std::function<void()>& body,
                                   const std::function<void(int)>& before) {
  cudaEvent_t e0, e1;
  LOOM_CUDA_CHECK(cudaEventCreate(&e0));
  LOOM_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> ms;
  for (int i = 0; i < warm + iters; i++) {
    if (before) before(i);
    LOOM_CUDA_CHECK(cudaEventRecord(e0, s));
    body();
    LOOM_CUDA_CHECK(cudaEventRecord(e1, s));
    LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    LOOM_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= warm) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms;
}

std::vector<double> graph_replays_ms(cudaGraphExec_t g, cudaStream_t s, int iters, int warm) {
  return event_times_ms(s, iters, warm, [&] { LOOM_CUDA_CHECK(cudaGraphLaunch(g, s)); });
}

double time_us(const Context& c, const std::function<void()>& launch, int iters, int warm) {
  static void* flush = nullptr;
  static size_t flush_bytes = 0;
  if (flush == nullptr) {
    int l2 = 0;
    LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    flush_bytes = size_t(std::max(l2, 1 << 20)) * 2;
    LOOM_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
  }
  const std::vector<double> ms = event_times_ms(c.stream, iters, warm, launch, [&](int i) {
    LOOM_CUDA_CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, c.stream));
  });
  return 1e3 * ms[ms.size() / 2];
}

nlohmann::json report(const Context& c, const char* op, DType t, const std::string& shape,
                      double us, double bytes, double err) {
  const double gbps = bytes / (us * 1e-6) / 1e9;
  const bool ok = err < tolerance(t);
  std::printf("%-22s %-5s %-18s %9.2f us %8.0f GB/s %6.2f x copy  %s (rel err %.1e)\n", op,
              dtype_name(t), shape.c_str(), us, gbps, gbps / c.copy_gbps, ok ? "valid" : "INVALID",
              err);
  return {{"op", op},
          {"dtype", dtype_name(t)},
          {"shape", shape},
          {"us", us},
          {"bytes", bytes},
          {"gbps", gbps},
          {"x_copy", gbps / c.copy_gbps},
          {"rel_err", err},
          {"valid", ok}};
}

std::vector<float> random_host(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

Buffers::~Buffers() {
  for (void* p : ptrs_) cudaFree(p);
}

void* Buffers::alloc(size_t bytes) {
  void* p = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
  ptrs_.push_back(p);
  return p;
}

void* Buffers::upload(const std::vector<float>& v, DType t) {
  void* p = alloc(v.size() * dtype_size(t));
  if (t == DType::F32) {
    LOOM_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  } else {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); i++) h[i] = f32_to_bf16(v[i]);
    LOOM_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  return p;
}

std::vector<float> Buffers::download(const void* p, size_t n, DType t) const {
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> v(n);
  if (t == DType::F32) {
    LOOM_CUDA_CHECK(cudaMemcpy(v.data(), p, n * 4, cudaMemcpyDeviceToHost));
  } else {
    std::vector<uint16_t> h(n);
    LOOM_CUDA_CHECK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) v[i] = bf16_to_f32(h[i]);
  }
  return v;
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); i++) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace loom::bench

#include "backend/cpu/ops.h"

namespace loom::bench {

double linear_rel_err(const void* x, const void* w, const void* y, DType y_t, int m, int n, int k,
                      int ldy) {
  const int rows = std::min(m, 8), cols = std::min(n, 64);
  Buffers none;
  const std::vector<float> hx = none.download(x, size_t(rows) * k, DType::BF16);
  const std::vector<float> hw = none.download(w, size_t(cols) * k, DType::BF16);
  std::vector<float> ref(size_t(rows) * cols), got(ref.size());
  cpu::matmul_nt(hx.data(), hw.data(), nullptr, ref.data(), rows, cols, k);
  for (int r = 0; r < rows; r++) {
    const std::vector<float> row = none.download(
        static_cast<const char*>(y) + size_t(r) * ldy * dtype_size(y_t), size_t(cols), y_t);
    std::copy(row.begin(), row.end(), got.begin() + long(r) * cols);
  }
  return rel_err(got, ref);
}

// One decode batch: n sequences, each with `ctx` cached slots, one new token.
StepBatch decode_batch(int n, int ctx, int block_size, float temperature, int top_k, float top_p) {
  StepBatch b;
  const int per_seq = (ctx + 1 + block_size - 1) / block_size;
  b.blocks_per_seq = per_seq;
  for (int s = 0; s < n; s++) {
    b.slot_start.push_back(s);
    b.tokens.push_back((s * 7919 + 13) % 262144);
    b.positions.push_back(ctx);
    b.kv_len.push_back(ctx);
    for (int j = 0; j < per_seq; j++) b.block_tables.push_back(s * per_seq + j);
    b.sample.push_back(1);
    b.sampling.push_back(SamplingParams{temperature, top_k, top_p, uint64_t(s)});
    b.sample_index.push_back(0);
    b.draw_index.push_back(0);
  }
  b.slot_start.push_back(n);
  return b;
}

// Median seconds of `iters` steps after `warm` warm-up steps (the draw index moves on).
double time_steps(Backend& be, StepBatch b, int warm, int iters) {
  StepOutput out;
  std::vector<double> t;
  for (int i = 0; i < warm + iters; i++) {
    for (auto& d : b.draw_index) d++;
    const double t0 = now_s();
    be.step(b, out);
    if (i >= warm) t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

LtGemm::LtGemm(int m, int n, int k, int ldy, cudaDataType_t y_type, int ldk) {
  if (ldk == 0) ldk = k;
  LOOM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t tr = CUBLAS_OP_T;
  LOOM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr));
  LOOM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&w, CUDA_R_16BF, k, n, ldk));
  LOOM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&x, CUDA_R_16BF, k, m, ldk));
  LOOM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&y, y_type, n, m, ldy));
}

void LtGemm::batch(int count, int64_t stride_w, int64_t stride_x, int64_t stride_y) {
  const int32_t n = count;
  for (auto [l, stride] : {std::pair{w, stride_w}, {x, stride_x}, {y, stride_y}}) {
    LOOM_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
    LOOM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
}

std::vector<cublasLtMatmulHeuristicResult_t> lt_heuristics(cublasLtHandle_t lt, const LtGemm& g,
                                                           int max) {
  cublasLtMatmulPreference_t pref = nullptr;
  LOOM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  LOOM_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &LtSession::kWsBytes, sizeof LtSession::kWsBytes));
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(max));
  int n = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, g.op, g.w, g.x, g.y, g.y, pref, max, res.data(), &n);
  cublasLtMatmulPreferenceDestroy(pref);
  LOOM_CUBLAS_CHECK(st);
  res.resize(static_cast<size_t>(n));
  return res;
}

uint32_t lt_config(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t at) {
  uint32_t v = 0;
  size_t sz = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, at, &v, sizeof v, &sz);
  return v;
}

LtSession::LtSession() {
  LOOM_CUBLAS_CHECK(cublasLtCreate(&lt));
  ws = buffers.alloc(kWsBytes);
}

LtSession::~LtSession() {
  cublasLtDestroy(lt);
}

LtGemm::~LtGemm() {
  cublasLtMatrixLayoutDestroy(w);
  cublasLtMatrixLayoutDestroy(x);
  cublasLtMatrixLayoutDestroy(y);
  cublasLtMatmulDescDestroy(op);
}

}  // namespace loom::bench
