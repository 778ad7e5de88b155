// Error tiers for the CUDA side (style.md §10). LOOM_CUDA_CHECK / LOOM_CUBLAS_CHECK wrap every
// runtime and cuBLAS call made by host code and throw loom::Error naming the statement, file,
// line and the library's message. Kernel launchers do not throw: they check their arguments
// and the launch and return a Status, which the backend turns into an Error with LOOM_KERNEL.
// This header is plain C++ so that host .cpp files include it without nvcc.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace loom::gpu {

// What a launcher reports: ok, or why it did not launch / why the launch failed.
struct Status {
  bool ok = true;
  std::string message;  // "<kernel>: <what was wrong, expected vs found>"

  static Status good() { return Status{}; }
  static Status bad(std::string m) { return Status{false, std::move(m)}; }
};

inline const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_(unknown)";
  }
}

// Status of the launch just made (a bad configuration shows up here, not at the next sync).
inline Status launch_status(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::good();
  return Status::bad(std::string(kernel) + ": launch failed: " + cudaGetErrorString(e));
}

}  // namespace loom::gpu

#define LOOM_CUDA_CHECK(expr)                                                                  \
  do {                                                                                         \
    const cudaError_t loom_cuda_err_ = (expr);                                                 \
    if (loom_cuda_err_ != cudaSuccess)                                                         \
      ::loom::fail("CUDA error at ", __FILE__, ":", __LINE__, ": ", #expr, ": ",               \
                   cudaGetErrorName(loom_cuda_err_), " (", cudaGetErrorString(loom_cuda_err_), \
                   ")");                                                                       \
  } while (0)

#define LOOM_CUBLAS_CHECK(expr)                                                    \
  do {                                                                             \
    const cublasStatus_t loom_cublas_st_ = (expr);                                 \
    if (loom_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                  \
      ::loom::fail("cuBLAS error at ", __FILE__, ":", __LINE__, ": ", #expr, ": ", \
                   ::loom::gpu::cublas_status_name(loom_cublas_st_));              \
  } while (0)

// Turns a launcher's Status into a loom::Error with the call site.
#define LOOM_KERNEL(expr)                                                          \
  do {                                                                             \
    const ::loom::gpu::Status loom_kst_ = (expr);                                  \
    if (!loom_kst_.ok)                                                             \
      ::loom::fail("kernel error at ", __FILE__, ":", __LINE__, ": ", #expr, ": ", \
                   loom_kst_.message);                                             \
  } while (0)

// Inside a launcher: return a bad Status when a condition on the arguments fails.
#define LOOM_ARG_CHECK(cond, ...)                                           \
  do {                                                                      \
    if (!(cond)) return ::loom::gpu::Status::bad(::loom::cat(__VA_ARGS__)); \
  } while (0)
