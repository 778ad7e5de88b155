// cuda_bench's per-family microbenchmarks (llm.c's dev/cuda loop, style.md §7): each family's
// file validates its kernel against the family's reference on the timed shapes, then times it
// with L2 flushed between launches and prints GB/s of the bytes it moves against the measured
// device-to-device copy bandwidth. kFamilyBenches is the table cuda_bench runs, in order; each
// entry's JSON goes under its key in cuda_bench's output.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/gemm.h"
#include "core/dtype.h"

namespace loom::bench {

struct Context {
  cudaStream_t stream = nullptr;
  int sms = 0;                // streaming multiprocessors of device 0
  double copy_gbps = 0;       // measured copy bandwidth, bytes read + written
  gpu::Gemm* gemm = nullptr;  // cuBLAS on `stream`, the baseline of the linear kernels
};

using Fn = nlohmann::json (*)(const Context&);
struct Family {
  const char* key;  // cuda_bench JSON key
  Fn run;
};

// In each family's file (tests/cuda/bench/<family>.cpp).
nlohmann::json bench_norm(const Context& c);              // norm.cpp: rms / layer norm
nlohmann::json bench_mlp_activation(const Context& c);    // mlp_activation.cpp
nlohmann::json bench_convert(const Context& c);           // activation.cpp
nlohmann::json bench_embed(const Context& c);             // embed.cpp: embed + positions
nlohmann::json bench_gemv(const Context& c);              // gemv.cpp: GEMV vs cuBLAS
nlohmann::json bench_lm_head(const Context& c);           // gemv.cpp: lm_head GEMV + draw
nlohmann::json bench_gemv_chain(const Context& c);        // gemv.cpp: the 88-GEMV chain
nlohmann::json bench_linear_fixed(const Context& c);      // linear_fixed.cpp
nlohmann::json bench_attention_decode(const Context& c);  // attention_decode.cpp
nlohmann::json bench_attention_mma(const Context& c);  // attention_decode.cpp → bench_attention.cpp
nlohmann::json bench_sampling(const Context& c);       // sampling.cpp: the device draw
nlohmann::json bench_gemm_algos(const Context& c);     // gemm_algos.cpp: cuBLASLt candidates
nlohmann::json bench_gemm_tiles(const Context& c);     // gemm_tiles.cpp: every Lt configuration
nlohmann::json bench_gemm_split_batched(const Context& c);  // gemm_split_batched.cpp
nlohmann::json bench_weight_stream(const Context& c);  // weight_stream.cu: one CTA an SM streaming

// The CUDA backend end to end on a Terra-size model (backend.cpp): fills r's keys load,
// kv_blocks, weight_bytes, streamed_bytes, floor_step_s, floor_s_per_frame, decode,
// graph_decomposition, draw_cost, prefill_1746_s, prefill_kernels.
void bench_backend(Backend& be, double copy_gbps, nlohmann::json& r);
// Where a decode step's device time goes at batch B and each context of ctxs (backend.cpp):
// the step's graph replayed with kernel families left out (cuda_set_debug_skip), a KV cache of
// kv (bf16 or fp8), and the eager per-family profile beside it.
nlohmann::json bench_step_case(Backend& be, int batch, const std::vector<int>& ctxs, KvDType kv,
                               bool scatter = false, bool power = false);
// The decode-step megakernel against the graph path, and its per-op trace (mega.cpp).
void bench_megakernel(Backend& be, double copy_gbps, nlohmann::json& r);
// Terra's 22 layers of qkv / o / gate_up / down through cuBLAS at each row count of `rows`, one
// graph a count (gemm_rows.cpp): ms a replay, and with power an ~8 s window of replays a count
// ({what, t0, t1, ms}) for scripts/power_windows.py.
nlohmann::json bench_gemm_rows(const Context& c, const std::vector<int>& rows, bool power);
// Joules a replay of Terra's decode GEMMs at m rows (only: those names, empty: all) for cuBLAS's
// default and cuBLASLt's heuristic algorithms (gemm_energy.cpp; NVML's energy counter, else
// power windows).
nlohmann::json bench_gemm_energy(const Context& c, int m, const std::vector<std::string>& only);

inline const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {"gemv_vs_cublas", bench_gemv},
      {"linear_fixed_vs_cublas", bench_linear_fixed},
      {"attention_decode", bench_attention_decode},
      {"attention_mma", bench_attention_mma},
      {"lm_head_and_draw", bench_lm_head},
      {"sampling", bench_sampling},
      {"gemm_algos", bench_gemm_algos},
      {"gemm_tiles", bench_gemm_tiles},
      {"gemm_split_batched", bench_gemm_split_batched},
      {"gemv_chain", bench_gemv_chain},
      {"ops_norm", bench_norm},
      {"ops_mlp_activation", bench_mlp_activation},
      {"ops_convert", bench_convert},
      {"ops_embed", bench_embed},
      {"weight_stream", bench_weight_stream},
  };
  return kFamilies;
}

// ---- helpers shared by the family files (bench_util.cpp)

double now_s();
// Seconds since the epoch (the wall clock nvidia-smi's timestamps are read against).
double wall_s();
// One decode batch: n sequences, each with `ctx` cached slots (block tables of block_size
// slots, sequence s on blocks s · per_seq …), one new token, every sequence drawing.
StepBatch decode_batch(int n, int ctx, int block_size, float temperature, int top_k, float top_p);
// Median seconds of Backend::step over `iters` steps after `warm` (the draw index moves on).
double time_steps(Backend& be, StepBatch b, int warm, int iters);

// Milliseconds of `iters` runs of body() on s, each between its own events, ascending; before(i)
// runs ahead of run i's first event (the first `warm` runs are not counted).
std::vector<double> event_times_ms(cudaStream_t s, int iters, int warm,
                                   const std::function<void()>& body,
                                   const std::function<void(int)>& before = nullptr);
// Milliseconds of `iters` replays of g on s, each between its own events, ascending (the first
// `warm` replays not counted).
std::vector<double> graph_replays_ms(cudaGraphExec_t g, cudaStream_t s, int iters, int warm = 3);

// Median microseconds of one launch(), each after an L2-sized memset so that it reads from HBM
// (the first `warm` launches are not counted).
double time_us(const Context& c, const std::function<void()>& launch, int iters = 30, int warm = 3);

// One elementwise measurement: prints "<op> <dtype> <shape>: us, GB/s, x copy" and returns it
// as JSON ({op, dtype, shape, us, bytes, gbps, x_copy, max_rel_err}).
nlohmann::json report(const Context& c, const char* op, DType t, const std::string& shape,
                      double us, double bytes, double rel_err);

// y[m, n] = x[m, k] · w[n, k]ᵀ as cuBLASLt takes it, column-major yᵀ[n, m] = w (op T) · xᵀ:
// the operation (fp32 accumulation) and the layouts of w, x (bf16) and y (y_type, ldy), for
// the GEMM families' searches (gemm_algos.cpp, gemm_tiles.cpp, gemm_split_batched.cpp). ldk:
// the operands' row length where k is a slice of it (0: k). Destroyed with the object.
struct LtGemm {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  LtGemm(int m, int n, int k, int ldy, cudaDataType_t y_type, int ldk = 0);
  // count products in one call, each operand's next one stride_* elements on.
  void batch(int count, int64_t stride_w, int64_t stride_x, int64_t stride_y);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
};

// Random host values and device buffers (cudaMalloc'd, freed by the Buffers destructor).
std::vector<float> random_host(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
class Buffers {
 public:
  ~Buffers();
  void* alloc(size_t bytes);
  void* upload(const std::vector<float>& v, DType t);  // as f32 or bf16
  template <class I>
  I* upload_ints(const std::vector<I>& v) {
    void* p = alloc(v.size() * sizeof(I));
    cudaMemcpy(p, v.data(), v.size() * sizeof(I), cudaMemcpyHostToDevice);
    return static_cast<I*>(p);
  }
  std::vector<float> download(const void* p, size_t n, DType t) const;

 private:
  std::vector<void*> ptrs_;
};

// A cuBLASLt handle and a workspace for the GEMM families' searches. Destroyed with the object.
struct LtSession {
  static constexpr size_t kWsBytes = size_t(32) << 20;
  cublasLtHandle_t lt = nullptr;
  Buffers buffers;
  void* ws = nullptr;
  LtSession();
  ~LtSession();
  LtSession(const LtSession&) = delete;
  LtSession& operator=(const LtSession&) = delete;
};

// cuBLASLt's heuristic algorithms for g (at most max) within LtSession's workspace, in the
// heuristic's order; a result whose state is not CUBLAS_STATUS_SUCCESS cannot run.
std::vector<cublasLtMatmulHeuristicResult_t> lt_heuristics(cublasLtHandle_t lt, const LtGemm& g,
                                                           int max);
// One configuration attribute of an algorithm (its id, tile, stages, split-K, swizzle, ...).
uint32_t lt_config(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t at);

// ‖a − b‖ / ‖b‖ (inf where a is not finite); the tolerance per dtype of the test suites.
double rel_err(const std::vector<float>& a, const std::vector<float>& b);
inline double tolerance(DType t) {
  return t == DType::F32 ? 1e-5 : 1e-2;
}

}  // namespace loom::bench

namespace loom::bench {

// ‖y − x·wᵀ‖ / ‖x·wᵀ‖ over the first (at most) 8 rows and 64 columns of y [m, ldy] (dtype y_t),
// x bf16 [m, k] and w bf16 [n, k] on the device, against cpu::matmul_nt: the validation of the
// linear kernels before they are timed.
double linear_rel_err(const void* x, const void* w, const void* y, DType y_t, int m, int n, int k,
                      int ldy);

}  // namespace loom::bench
