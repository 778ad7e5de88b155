#include "backend/cuda/gemm.h"

#include "kernels/cuda_check.cuh"

namespace loom::gpu {

constexpr size_t kWorkspaceBytes = 32u << 20;

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
  if (workspace_ != nullptr) cudaFree(workspace_);
}

void Gemm::init(cudaStream_t stream) {
  LOOM_CUBLAS_CHECK(cublasCreate(&handle_));
  LOOM_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  LOOM_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes));
  // Default math: fp32 operands with CUBLAS_COMPUTE_32F stay plain fp32 (no TF32), the exact
  // comparison with the CPU backend; bf16 operands use the tensor cores.
  LOOM_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  set_stream(stream);
}

void Gemm::set_stream(cudaStream_t stream) {
  LOOM_CUBLAS_CHECK(cublasSetStream(handle_, stream));
}

static cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F16:
      return CUDA_R_16F;
    default:
      fail("gemm: dtype ", dtype_name(t), " (expected f32, bf16 or f16)");
  }
}

void Gemm::run(DType t, const void* x, const void* w, DType y_t, void* y, int m, int n, int k,
               float beta, int ldy) const {
  LOOM_CHECK(m >= 0 && n > 0 && k > 0, "gemm: m ", m, ", n ", n, ", k ", k);
  if (m == 0) return;
  const float alpha = 1.0f;
  // Column-major view: yᵀ[n, m] = w[n, k] (stored as k×n, transposed) · xᵀ[k, m].
  LOOM_CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w,
                                 cuda_type(t), k, x, cuda_type(t), k, &beta, y, cuda_type(y_t),
                                 ldy > 0 ? ldy : n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace loom::gpu
