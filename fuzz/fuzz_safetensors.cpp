// libFuzzer entry: safetensors (see harness.h for the contract).
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    loom::fuzz::safetensors_input(data, size);
  } catch (const loom::Error&) {
    // Rejected with a message: the expected outcome for a bad input.
  }
  return 0;
}
