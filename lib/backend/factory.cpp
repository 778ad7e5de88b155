// make_backend() lives in its own library target (loom_factory) with the CUDA module loader
// (backend/module.h): loom_lib, which the module links as well, knows nothing of dlopen, and
// loom itself links no CUDA library.
#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/module.h"
#include "core/error.h"

namespace loom {

bool cuda_available(std::string* why) {
  const CudaStatus& s = cuda_status();
  if (why) *why = s.why;
  return s.state == CudaState::Ready;
}

std::unique_ptr<Backend> make_backend(BackendKind kind, ComputeDType dtype, int device,
                                      bool batch_invariant) {
  if (kind == BackendKind::Cpu) {
    LOOM_CHECK(dtype == ComputeDType::F32, "the cpu backend computes in f32; pass --dtype f32");
    // The cpu backend is batch-invariant by construction (each row's loops run alone, in a
    // fixed order): --batch-invariant is accepted and changes nothing.
    return make_cpu_backend();
  }
  const CudaStatus& s = cuda_status();
  LOOM_CHECK(s.module != nullptr, "the cuda backend is not available: ", s.why,
             "; use --backend cpu");
  return s.module->make_backend(dtype, device, batch_invariant);
}

}  // namespace loom
