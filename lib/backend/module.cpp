#include "backend/module.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstring>

#include "core/error.h"
#include "core/exe_dir.h"

#ifndef LOOM_BACKEND_INTERFACE
#error "LOOM_BACKEND_INTERFACE comes from CMakeLists.txt"
#endif

namespace loom {

std::vector<std::string> cuda_module_paths() {
  const std::string dir = exe_dir();
  if (dir.empty()) return {};
  return {dir + "/" + kCudaModuleFile, exe_prefix() + "/lib/loom/" + kCudaModuleFile};
}

namespace {

bool is_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// GPUs as the driver (libcuda.so.1) counts them, asked directly and without the module: when
// the module fails, this tells "no GPU here" (--backend auto falls back to the cpu) from "a GPU
// loom cannot use" (an error). The handle stays open: the module's runtime loads it anyway.
int driver_device_count(std::string* why) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *why = cat("no NVIDIA driver (", dlerror(), ")");
    return 0;
  }
  using InitFn = int (*)(unsigned);                // CUresult cuInit(unsigned flags)
  using CountFn = int (*)(int*);                   // CUresult cuDeviceGetCount(int* count)
  using ErrorNameFn = int (*)(int, const char**);  // CUresult cuGetErrorName(CUresult, ...)
  const auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  const auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  const auto error_name = reinterpret_cast<ErrorNameFn>(dlsym(lib, "cuGetErrorName"));
  if (!init || !count) {
    *why = "libcuda.so.1 has no cuInit or cuDeviceGetCount";
    return 0;
  }
  int n = 0;
  const char* call = "cuInit";
  int rc = init(0);
  if (rc == 0) {
    call = "cuDeviceGetCount";
    rc = count(&n);
  }
  if (rc != 0) {
    const char* name = nullptr;
    if (!error_name || error_name(rc, &name) != 0 || !name) name = "unknown error";
    *why = cat("the NVIDIA driver finds no usable GPU (", call, ": ", name, ")");
    return 0;
  }
  if (n == 0) *why = "the NVIDIA driver finds no GPU";
  return n;
}

CudaStatus probe_cuda() {
  CudaStatus s;
  const std::vector<std::string> paths = cuda_module_paths();
  std::string path;
  for (const std::string& p : paths)
    if (is_file(p)) {
      path = p;
      break;
    }
  if (path.empty()) {
    std::string looked;
    for (const std::string& p : paths) looked += (looked.empty() ? "" : ", ") + p;
    s.state = CudaState::Absent;
    s.why = cat("no CUDA module (looked for ", looked,
                "): this loom was built without CUDA or installed without its module");
    return s;
  }

  std::string failure;  // why the module cannot run here
  if (void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    using EntryFn = const BackendModule* (*)();
    const auto entry = reinterpret_cast<EntryFn>(dlsym(lib, kModuleEntry));
    const BackendModule* m = entry ? entry() : nullptr;
    if (!m) {
      failure = cat("the CUDA module ", path, " exports no ", kModuleEntry, "()");
    } else if (std::strcmp(m->interface_stamp, LOOM_BACKEND_INTERFACE) != 0) {
      failure = cat("the CUDA module ", path, " was built from another loom (interface ",
                    m->interface_stamp, ", this loom's ", LOOM_BACKEND_INTERFACE,
                    "); install loom and its module from one build");
    } else {
      s.module = m;
      if (m->device_count(&failure) > 0) {
        s.state = CudaState::Ready;
        return s;
      }
    }
  } else {
    failure = cat("cannot load the CUDA module ", path, ": ", dlerror());
  }

  std::string no_gpu;
  if (driver_device_count(&no_gpu) > 0) {
    s.state = CudaState::Unusable;
    s.why = failure;
  } else {
    // The driver's reason is the root one (without libcuda.so.1 the runtime reports an
    // "insufficient driver"); a module that did not load is named as well.
    s.state = CudaState::NoDevice;
    s.why = s.module ? no_gpu : cat(no_gpu, "; ", failure);
  }
  return s;
}

}  // namespace

const CudaStatus& cuda_status() {
  static const CudaStatus status = probe_cuda();
  return status;
}

}  // namespace loom
