// The CUDA backend is a shared module (libloom-cuda.so) that loom loads with dlopen the first
// time it is asked about CUDA, so that loom itself links no CUDA library: inspect, merge and the
// cpu backend run on a node with no CUDA installed, and only `--backend cuda` needs cuBLAS and a
// driver (llama.cpp's dynamic backends are the model). The module exports one C function,
// loom_backend_module(), that returns a BackendModule: the backend's entry points and the
// interface stamp of the build that made it.
//
// Both sides are C++ from one build (std::string, std::unique_ptr<Backend> and loom::Error
// cross the boundary), so the stamp is a hash of the compiler and of the headers that define
// those types (CMakeLists.txt, LOOM_BACKEND_INTERFACE); loom refuses a module stamped otherwise
// rather than call into a Backend whose layout it does not know.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace loom {

struct BackendModule {
  const char* interface_stamp;  // first, so it can be read before anything else is trusted
  // Usable devices; 0 with *why filled when none.
  int (*device_count)(std::string* why);
  // Throws loom::Error (see make_cuda_backend).
  std::unique_ptr<Backend> (*make_backend)(ComputeDType dtype, int device, bool batch_invariant);
};

constexpr const char* kCudaModuleFile = "libloom-cuda.so";
constexpr const char* kModuleEntry = "loom_backend_module";  // extern "C" const BackendModule*()

// Where the module is looked for, in order: beside the binary (build tree: build/bin) and
// <exe dir>/../lib/loom (install prefix).
std::vector<std::string> cuda_module_paths();

enum class CudaState {
  Ready,     // the module loaded and found a device
  Absent,    // no module: built without CUDA, or not installed
  NoDevice,  // no usable GPU on this machine (no driver, or the driver finds none)
  Unusable,  // the driver sees a GPU but the module cannot use it (libraries, driver version)
};

struct CudaStatus {
  CudaState state = CudaState::Absent;
  std::string why;  // empty when Ready; otherwise what is missing, paths and dlerror included
  const BackendModule* module = nullptr;  // set when the module loaded, whatever the devices
};

// Loads the module and asks it for devices, once per process. --backend auto falls back to the
// cpu on Absent and NoDevice; on Unusable it should stop with `why`.
const CudaStatus& cuda_status();

}  // namespace loom
