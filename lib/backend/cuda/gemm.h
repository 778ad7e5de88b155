// Row-major GEMMs through cuBLAS: y[m, n] = x[m, k] · w[n, k]ᵀ (nn.Linear without bias), fp32
// accumulation. bf16 operands by default; fp32 operands (ComputeDType::F32) use plain fp32
// math (no TF32) so that the CUDA backend matches the CPU reference to ~1e-6.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/dtype.h"

namespace loom::gpu {

class Gemm {
 public:
  Gemm() = default;
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Creates the handle and a fixed workspace (so that calls can be captured in CUDA graphs).
  void init(cudaStream_t stream);
  void set_stream(cudaStream_t stream);

  // x, w in dtype t (F32 or BF16); y in y_t (t, or F32 for bf16 operands: logits).
  // beta 0: y = x·wᵀ; beta 1: y += x·wᵀ.
  // ldy: elements between rows of y (0: n).
  void run(DType t, const void* x, const void* w, DType y_t, void* y, int m, int n, int k,
           float beta = 0.0f, int ldy = 0) const;

 private:
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // [kWorkspaceBytes]
};

}  // namespace loom::gpu
