// The CUDA module loader (backend/module.h) as this build left it: where a module was built
// (beside the test binaries in build/bin) it loads, carries this build's interface, and a
// loom::Error thrown inside it reaches the caller as a loom::Error with its text; without one,
// --backend cuda says where it looked. No GPU is needed: the checks stop before any device.
// tests/test_install.sh covers the installed layout, a removed module and one that fails to load.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "backend/backend.h"
#include "backend/module.h"
#include "core/error.h"

using namespace loom;

namespace {

// LOOM_BIN_DIR as /proc/self/exe names it (symlinks resolved).
std::string bin_dir() {
  char real[PATH_MAX];
  return realpath(LOOM_BIN_DIR, real) ? real : LOOM_BIN_DIR;
}

bool module_built() {
  struct stat st;
  return stat((bin_dir() + "/" + kCudaModuleFile).c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("the CUDA module is searched beside the binary, then in <prefix>/lib/loom") {
  const std::vector<std::string> paths = cuda_module_paths();
  REQUIRE(paths.size() == 2);
  const std::string bin = bin_dir();
  CHECK(paths[0] == bin + "/libloom-cuda.so");
  CHECK(paths[1] == bin.substr(0, bin.find_last_of('/')) + "/lib/loom/libloom-cuda.so");
}

TEST_CASE("cuda_status and make_backend agree with the module this build made") {
  const CudaStatus& s = cuda_status();
  std::string why;
  CHECK(cuda_available(&why) == (s.state == CudaState::Ready));
  CHECK(why == s.why);
  if (module_built()) {
    // Loaded (the interface stamps matched); only the devices decide the state.
    REQUIRE(s.module != nullptr);
    CHECK(s.state != CudaState::Absent);
    if (s.state != CudaState::Ready) CHECK_FALSE(s.why.empty());
    // make_cuda_backend refuses --batch-invariant in f32 before it looks for a device: the
    // error crosses the dlopen boundary as a loom::Error, text intact.
    bool caught = false;
    try {
      make_backend(BackendKind::Cuda, ComputeDType::F32, 0, /*batch_invariant=*/true);
    } catch (const Error& e) {
      caught = true;
      CHECK(std::string(e.what()).find(
                "--batch-invariant on the cuda backend needs --dtype bf16") != std::string::npos);
    }
    CHECK(caught);
  } else {
    CHECK(s.state == CudaState::Absent);
    CHECK(s.module == nullptr);
    CHECK(s.why.find("no CUDA module (looked for " + bin_dir() + "/libloom-cuda.so") == 0);
    CHECK_THROWS_WITH_AS(make_backend(BackendKind::Cuda, ComputeDType::BF16, 0),
                         doctest::Contains("the cuda backend is not available: no CUDA module"),
                         Error);
  }
  // The cpu backend never touches the module.
  CHECK(make_backend(BackendKind::Cpu, ComputeDType::F32, 0)->name() == "cpu");
}
