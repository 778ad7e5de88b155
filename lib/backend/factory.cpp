// make_backend() lives in its own library target (loom_factory), linked after the CUDA
// backend, so loom_lib need not know whether CUDA was built.
#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#endif

namespace loom {

bool cuda_available(std::string* why) {
#ifdef LOOM_HAVE_CUDA
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why) *why = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device";
    return false;
  }
  return true;
#else
  if (why) *why = "built without CUDA";
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(BackendKind kind, ComputeDType dtype, int device,
                                      bool batch_invariant) {
  if (kind == BackendKind::Cpu) {
    LOOM_CHECK(dtype == ComputeDType::F32, "the cpu backend computes in f32; pass --dtype f32");
    // The cpu backend is batch-invariant by construction (each row's loops run alone, in a
    // fixed order): --batch-invariant is accepted and changes nothing.
    return make_cpu_backend();
  }
#ifdef LOOM_HAVE_CUDA
  return make_cuda_backend(dtype, device, batch_invariant);
#else
  (void)device;
  (void)batch_invariant;
  fail("this loom was built without CUDA (LOOM_CUDA=OFF or no nvcc found); use --backend cpu");
#endif
}

}  // namespace loom
