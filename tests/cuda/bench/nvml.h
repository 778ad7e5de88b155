// NVML through dlopen (libnvidia-ml ships with the driver, not the toolkit): the device's
// energy counter (mJ since the driver loaded) and its SM clock, for cuda_bench's joules (the
// GEMM energy case, the pipeline case's power mode). Without the library every reading is 0.
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

namespace loom::bench {

class Nvml {
 public:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (lib_ == nullptr) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(
        dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    energy_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(
        dlsym(lib_, "nvmlDeviceGetTotalEnergyConsumption"));
    clock_ =
        reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib_, "nvmlDeviceGetClockInfo"));
    char bus[32] = {};
    if (init == nullptr || by_bus == nullptr || energy_ == nullptr || clock_ == nullptr ||
        init() != 0 || cudaDeviceGetPCIBusId(bus, sizeof bus, 0) != cudaSuccess ||
        by_bus(bus, &dev_) != 0)
      dev_ = nullptr;
  }
  ~Nvml() {
    if (lib_ != nullptr) dlclose(lib_);
  }
  bool ok() const { return dev_ != nullptr; }
  double joules() const {  // 0 without NVML
    unsigned long long mj = 0;
    return ok() && energy_(dev_, &mj) == 0 ? 1e-3 * double(mj) : 0.0;
  }
  unsigned sm_mhz() const {
    unsigned mhz = 0;
    return ok() && clock_(dev_, 1 /* NVML_CLOCK_SM */, &mhz) == 0 ? mhz : 0u;
  }

 private:
  void* lib_ = nullptr;
  void* dev_ = nullptr;
  int (*energy_)(void*, unsigned long long*) = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;
};

}  // namespace loom::bench
