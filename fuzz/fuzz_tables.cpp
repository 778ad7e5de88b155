// libFuzzer entry: mapping tables (see harness.h for the contract): the input is a table,
// loaded on every tiny checkpoint in testdata/. Seeds: fuzz/corpus/tables (the bundled tables);
// dictionary: fuzz/tables.dict (role, field, feature and transform names).
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    loom::fuzz::tables_input(data, size);
  } catch (const loom::Error&) {
    // Rejected with a message: the expected outcome for a bad input.
  }
  return 0;
}
