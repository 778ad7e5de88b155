// Dataset output (lib/io/tokens_out.h): file names that cannot leave DIR nor collide, the exact
// safetensors bytes, and — where a Python with numpy + safetensors is at hand — the files
// loaded by the real `safetensors` package and compared with the JSONL (tests/tokens_out_check.py).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/results.h"
#include "io/tokens_out.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("loom_test_tokens_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

JobResult frames_result(const std::string& id, uint32_t sample, int frames, int per_frame) {
  JobResult r;
  r.id = id;
  r.sample = sample;
  r.line = 1;
  r.has_frames = true;
  for (int f = 0; f < frames; ++f) {
    r.frames.emplace_back();
    for (int t = 0; t < per_frame; ++t) r.frames.back().push_back(f * 1000 + t * 7 + int(sample));
  }
  return r;
}

// A Python that has numpy and safetensors: $LOOM_PYTHON (ctest sets it to the venv that
// scripts/setup.sh --python makes), else python3; "" when none.
std::string python_with_safetensors() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("LOOM_PYTHON")) candidates.push_back(p);
  candidates.push_back("python3");
  for (const std::string& py : candidates) {
    std::string cmd = py + " -c 'import numpy, safetensors.numpy' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

}  // namespace

TEST_SUITE("tokens_out") {
  TEST_CASE("file ids: safe names kept, others replaced and hashed, never leaving DIR") {
    CHECK(tokens_file_id("cam-01.a_b") == "cam-01.a_b");
    CHECK(tokens_file_id("a/b") == "a_b-0d0f158b");
    CHECK(tokens_file_id("a:b") == "a_b-0d451ee2");  // same stem, different file
    CHECK(tokens_file_id("../../etc/passwd") == "_._.._etc_passwd-a1da228c");
    CHECK(tokens_file_id(".hidden") == "_hidden-9b7dda77");
    CHECK(tokens_file_id("vid\xc3\xa9o") == "vid__o-fc4c8333");
    CHECK(tokens_file_id(std::string(120, 'x')) == std::string(120, 'x'));
    CHECK(tokens_file_id(std::string(130, 'x')) == std::string(120, 'x') + "-ab5c561b");
    CHECK(tokens_file_name("a/b", 3) == "a_b-0d0f158b.sample-3.safetensors");
    for (const char* bad : {"", ".", ".."}) {
      CHECK_THROWS_WITH_AS(tokens_file_id(bad),
                           ("job id \"" + std::string(bad) +
                            "\" cannot name a tokens file: expected an id other than \"\", \".\" "
                            "and \"..\"")
                               .c_str(),
                           loom::Error);
    }
  }

  TEST_CASE("frame result: exact safetensors bytes, read back") {
    fs::path dir = temp_dir() / "frames";
    JobResult r = frames_result("run/7", 2, 3, 5);
    std::string path = write_tokens_safetensors(dir.string(), r, "tiny-v1", 1234);
    CHECK(path == (dir / "run_7-605d3712.sample-2.safetensors").string());
    std::string bytes = slurp(path);
    REQUIRE(bytes.size() >= 8);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    CHECK(n % 8 == 0);
    REQUIRE(bytes.size() == 8 + n + 3 * 5 * 4);
    std::string header = bytes.substr(8, n);
    std::string json =
        R"({"__metadata__":{"id":"run/7","sample":"2","seed":"1234","model":"tiny-v1"},)"
        R"("tokens":{"dtype":"I32","shape":[3,5],"data_offsets":[0,60]}})";
    CHECK(n == 144);  // 137 bytes of JSON, padded with spaces to a multiple of 8
    CHECK(header == json + std::string(n - json.size(), ' '));
    std::vector<int32_t> data(15);
    std::memcpy(data.data(), bytes.data() + 8 + n, 60);
    CHECK(data[0] == 2);               // frame 0, token 0, sample 2
    CHECK(data[4] == 4 * 7 + 2);       // frame 0, token 4
    CHECK(data[5] == 1000 + 2);        // frame 1, token 0
    CHECK(data[14] == 2000 + 28 + 2);  // frame 2, token 4
    // No temporary file is left beside it.
    int files = 0;
    for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
    CHECK(files == 1);
    fs::remove_all(dir.parent_path());
  }

  TEST_CASE("plain result: [1, n]; ragged frames and unwritable dirs are errors") {
    fs::path dir = temp_dir();
    JobResult r;
    r.id = "p";
    r.tokens = {5, 6, 7};
    std::string bytes = slurp(write_tokens_safetensors(dir.string(), r, "llama", 0));
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    auto header = nlohmann::json::parse(bytes.substr(8, n));
    CHECK(header["tokens"]["shape"] == nlohmann::json::array({1, 3}));
    CHECK(header["tokens"]["data_offsets"] == nlohmann::json::array({0, 12}));
    int32_t last = 0;
    std::memcpy(&last, bytes.data() + 8 + n + 8, 4);
    CHECK(last == 7);

    JobResult ragged = frames_result("rg", 0, 2, 4);
    ragged.frames[1].pop_back();
    CHECK_THROWS_WITH_AS(write_tokens_safetensors(dir.string(), ragged, "m", 0),
                         "job rg sample 0: frame 1 has 3 tokens: expected 4 like frame 0",
                         loom::Error);
    if (geteuid() != 0) {  // root writes anywhere
      fs::path ro = dir / "ro";
      fs::create_directories(ro);
      chmod(ro.c_str(), 0500);
      CHECK_THROWS_WITH_AS(write_tokens_safetensors(ro.string(), r, "m", 0),
                           ("cannot write tokens to " + ro.string() +
                            "/p.sample-0.safetensors: Permission denied; check the directory "
                            "exists and is writable")
                               .c_str(),
                           loom::Error);
      chmod(ro.c_str(), 0700);
    }
    CHECK_THROWS_AS(write_tokens_safetensors("/proc/loom-no-such-dir", r, "m", 0), loom::Error);
    fs::remove_all(dir);
  }

  TEST_CASE("safetensors (Python) loads the files and they equal the JSONL") {
    std::string py = python_with_safetensors();
    // Never a silent pass: the dataset files must load in Python wherever the suite runs.
    REQUIRE_MESSAGE(!py.empty(), "no Python with numpy and safetensors: run scripts/setup.sh "
                                 "--python or set LOOM_PYTHON");
    fs::path dir = temp_dir() / "ds";
    fs::path results = temp_dir() / "results.jsonl";
    {
      ResultWriter w(results.string(), false);
      std::vector<JobResult> rs = {frames_result("a", 0, 4, 10), frames_result("a", 1, 4, 10),
                                   frames_result("x/../y", 0, 1, 10),
                                   frames_result("zero", 0, 0, 0)};
      JobResult plain;
      plain.id = "plain";
      plain.tokens = {1, 2, 3, 999};
      rs.push_back(plain);
      for (const JobResult& r : rs) {
        write_tokens_safetensors(dir.string(), r, "tiny", 77);
        w.write(r);
      }
      JobResult err;
      err.ok = false;
      err.id = "bad";
      err.error = "line 9: nope";
      w.write(err);
    }
    std::string script = std::string(LOOM_SOURCE_DIR) + "/tests/tokens_out_check.py";
    std::string cmd = py + " " + script + " " + dir.string() + " " + results.string();
    CHECK(std::system(cmd.c_str()) == 0);

    // The check must fail when a value differs.
    JobResult wrong = frames_result("a", 1, 4, 10);
    wrong.frames[3][9] += 1;
    write_tokens_safetensors(dir.string(), wrong, "tiny", 77);
    CHECK(std::system((cmd + " 2>/dev/null >/dev/null").c_str()) != 0);
    fs::remove_all(dir.parent_path());
  }
}
