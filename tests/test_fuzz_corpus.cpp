// Replays the committed fuzz corpora (fuzz/corpus/<target>/) through the same harness the
// libFuzzer targets run (fuzz/harness.h): every input must be accepted or rejected with
// loom::Error — any other exception fails here, and a crash or broken invariant aborts.
// The regular suite thus keeps every input the fuzzers once found interesting.
#include <doctest/doctest.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/harness.h"

namespace fs = std::filesystem;

namespace {

struct Replay {
  int inputs = 0, accepted = 0, rejected = 0;
};

template <class Fn>
Replay replay(const char* target, Fn run) {
  Replay r;
  fs::path dir = fs::path(LOOM_SOURCE_DIR) / "fuzz" / "corpus" / target;
  REQUIRE(fs::is_directory(dir));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    std::ifstream in(p, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    ++r.inputs;
    try {
      run(bytes.data(), bytes.size());
      ++r.accepted;
    } catch (const loom::Error&) {
      ++r.rejected;
    } catch (const std::exception& e) {
      FAIL_CHECK(p.string(), ": escaped as ", typeid(e).name(), " (not loom::Error): ", e.what());
    } catch (...) {
      FAIL_CHECK(p.string(), ": threw something that is not a std::exception");
    }
  }
  MESSAGE(std::string(target), ": ", r.inputs, " inputs, ", r.accepted, " accepted, ", r.rejected,
          " rejected");
  return r;
}

}  // namespace

TEST_SUITE("fuzz_corpus") {
  TEST_CASE("jobs corpus: parse_job_line never throws, accepted jobs keep their invariants") {
    Replay r = replay("jobs", [](const uint8_t* d, size_t n) { loom::fuzz::jobs_input(d, n); });
    CHECK(r.inputs >= 20);
    CHECK(r.rejected == 0);  // parse_job_line reports bad lines as JobError, never throws
  }

  TEST_CASE("safetensors corpus: accepted or loom::Error, never anything else") {
    Replay r = replay("safetensors",
                      [](const uint8_t* d, size_t n) { loom::fuzz::safetensors_input(d, n); });
    CHECK(r.inputs >= 8);
    CHECK(r.accepted >= 3);  // the valid seeds
    CHECK(r.rejected >= 5);  // the broken seeds
  }

  TEST_CASE("checkpoint index corpus: accepted or loom::Error, never anything else") {
    Replay r = replay("checkpoint_index",
                      [](const uint8_t* d, size_t n) { loom::fuzz::checkpoint_index_input(d, n); });
    CHECK(r.inputs >= 8);
    CHECK(r.accepted >= 1);
    CHECK(r.rejected >= 7);
  }
}
