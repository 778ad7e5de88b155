// The one symbol libloom-cuda.so exports (backend/module.h): the CUDA backend's entry points
// and the interface stamp of this build. Everything else in the module is hidden
// (-fvisibility=hidden, --exclude-libs), so its copies of loom_lib and of the static CUDA
// runtime never meet the binary's.
#include "backend/cuda/cuda_backend.h"
#include "backend/module.h"

#ifndef LOOM_BACKEND_INTERFACE
#error "LOOM_BACKEND_INTERFACE comes from CMakeLists.txt"
#endif

namespace {

const loom::BackendModule kCudaModule{
    LOOM_BACKEND_INTERFACE,
    &loom::cuda_device_count,
    &loom::make_cuda_backend,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const loom::BackendModule* loom_backend_module() {
  return &kCudaModule;
}
