// Resume (lib/io/resume.h): which samples a results file holds, torn last lines cut off with
// the exact byte count, malformed middle lines refused by line number, and a writer killed
// with SIGKILL mid-stream whose file, resumed, ends with every record exactly once.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "io/results.h"
#include "io/resume.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("loom_test_resume_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

void put(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

JobResult ok_record(const std::string& id, uint32_t sample, int frames) {
  JobResult r;
  r.id = id;
  r.sample = sample;
  r.line = 1;
  r.has_frames = true;
  r.frames.assign(size_t(frames), std::vector<int32_t>(576, 7));
  return r;
}

}  // namespace

TEST_SUITE("resume") {
  TEST_CASE("no results file yet: nothing done, nothing dropped") {
    ResumeState st = scan_results("/nonexistent-loom-dir/out.jsonl");
    CHECK_FALSE(st.existed);
    CHECK_FALSE(st.done("a", 0));
    CHECK(st.ok_records == 0);
  }

  TEST_CASE("a clean file: ok samples and error ids are known, the file is untouched") {
    fs::path dir = temp_dir();
    fs::path p = dir / "out.jsonl";
    std::string text = R"({"id":"a","sample":0,"status":"ok","line":1,"frames":[[1]]})"
                       "\n"
                       R"({"id":"a","sample":2,"status":"ok","line":1,"frames":[[1]]})"
                       "\n\n"
                       R"({"id":"line-4","status":"error","line":4,"error":"line 4: bad"})"
                       "\n";
    put(p, text);
    ResumeState st = scan_results(p.string());
    CHECK(st.existed);
    CHECK(st.ok_records == 2);
    CHECK(st.error_records == 1);
    CHECK(st.dropped_bytes == 0);
    CHECK(st.done("a", 0));
    CHECK_FALSE(st.done("a", 1));
    CHECK(st.done("a", 2));
    CHECK_FALSE(st.done("b", 0));
    CHECK(st.failed("line-4"));
    CHECK(st.skip("line-4", 0));
    CHECK_FALSE(st.skip("a", 1));
    CHECK(slurp(p) == text);
    fs::remove_all(dir);
  }

  TEST_CASE("a torn last line (no newline) is cut off and its bytes counted") {
    fs::path dir = temp_dir();
    fs::path p = dir / "out.jsonl";
    std::string good = R"({"id":"a","sample":0,"status":"ok","line":1,"frames":[[1]]})"
                       "\n";
    std::string torn = R"({"id":"b","sample":0,"status":"ok","line":2,"fram)";
    put(p, good + torn);
    ResumeState st = scan_results(p.string());
    CHECK(st.dropped_bytes == int64_t(torn.size()));
    CHECK(st.dropped_line == 2);
    CHECK(st.done("a", 0));
    CHECK_FALSE(st.done("b", 0));
    CHECK(slurp(p) == good);

    // A complete record that merely lacks its newline is dropped too (it will be redone).
    std::string whole = R"({"id":"c","sample":0,"status":"ok","line":3,"frames":[]})";
    put(p, good + whole);
    st = scan_results(p.string());
    CHECK(st.dropped_bytes == int64_t(whole.size()));
    CHECK_FALSE(st.done("c", 0));
    CHECK(slurp(p) == good);
    fs::remove_all(dir);
  }

  TEST_CASE("an unparsable last line with a newline is cut off as well") {
    fs::path dir = temp_dir();
    fs::path p = dir / "out.jsonl";
    std::string good = R"({"id":"a","sample":0,"status":"ok","line":1,"frames":[[1]]})"
                       "\n";
    put(p, good + "{\"id\":\"b\",\"sam\n\n");
    ResumeState st = scan_results(p.string());
    CHECK(st.dropped_bytes == 16);  // 14 bytes of torn line, its newline, the blank line after
    CHECK(slurp(p) == good);
    fs::remove_all(dir);
  }

  TEST_CASE("a malformed line before the end is an error naming the file and line") {
    fs::path dir = temp_dir();
    fs::path p = dir / "out.jsonl";
    std::string text = R"({"id":"a","sample":0,"status":"ok","line":1})"
                       "\n"
                       R"({"id":"a","status":"done"})"
                       "\n"
                       R"({"id":"b","sample":0,"status":"ok","line":2})"
                       "\n";
    put(p, text);
    CHECK_THROWS_WITH_AS(scan_results(p.string()),
                         ("results file " + p.string() +
                          " line 2: expected \"status\" \"ok\" or \"error\", found \"done\"; only "
                          "the last line may be torn. Fix or remove that line, or write to a new "
                          "--out")
                             .c_str(),
                         loom::Error);
    put(p, "garbage\n" + text);
    CHECK_THROWS_WITH_AS(scan_results(p.string()),
                         ("results file " + p.string() +
                          " line 1: not valid JSON (The JSON document has an improper structure: "
                          "missing or superfluous commas, braces, missing keys, etc.); only the "
                          "last line may be torn. Fix or remove that line, or write to a new --out")
                             .c_str(),
                         loom::Error);
    CHECK(slurp(p) == "garbage\n" + text);  // never truncated on error
    put(p, R"({"id":"a","status":"ok"})"
           "\n{}\n");
    CHECK_THROWS_WITH_AS(scan_results(p.string()),
                         ("results file " + p.string() +
                          " line 1: expected an \"ok\" record to carry an integer \"sample\"; only "
                          "the last line may be torn. Fix or remove that line, or write to a new "
                          "--out")
                             .c_str(),
                         loom::Error);
    CHECK_THROWS_WITH_AS(scan_results("-"),
                         "--resume needs a results file to append to, not stdout; pass --out FILE",
                         loom::Error);
    fs::remove_all(dir);
  }

  TEST_CASE("SIGKILL mid-stream, then resume: every record exactly once, no torn line") {
    fs::path dir = temp_dir();
    fs::path p = dir / "out.jsonl";
    const int kJobs = 400, kSamples = 2;
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // the "run": large records (~60 KB) so a kill can land inside one
      ResultWriter w(p.string(), false);
      for (int j = 0; j < kJobs; ++j)
        for (uint32_t s = 0; s < kSamples; ++s)
          w.write(ok_record("job-" + std::to_string(j), s, 25));
      _exit(0);
    }
    // Kill it once a part of the file is written.
    for (int i = 0; i < 2000 && (!fs::exists(p) || fs::file_size(p) < 3'000'000); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    uintmax_t size_at_kill = fs::file_size(p);

    ResumeState st = scan_results(p.string());
    MESSAGE("killed at ", size_at_kill, " bytes: ", st.ok_records, " records kept, ",
            st.dropped_bytes, " bytes of a torn line dropped");
    CHECK(st.ok_records > 0);
    CHECK(fs::file_size(p) == size_at_kill - uintmax_t(st.dropped_bytes));
    {
      ResultWriter w(p.string(), true);
      for (int j = 0; j < kJobs; ++j)
        for (uint32_t s = 0; s < kSamples; ++s) {
          std::string id = "job-" + std::to_string(j);
          if (!st.skip(id, s)) w.write(ok_record(id, s, 25));
        }
    }
    std::ifstream in(p);
    std::map<std::pair<std::string, int>, int> seen;
    int lines = 0;
    for (std::string s; std::getline(in, s); ++lines) {
      auto j = nlohmann::json::parse(s);  // throws on a torn line
      ++seen[{j["id"].get<std::string>(), j["sample"].get<int>()}];
    }
    CHECK(lines == kJobs * kSamples);
    CHECK(seen.size() == size_t(kJobs * kSamples));
    for (auto& [key, n] : seen) CHECK(n == 1);
    fs::remove_all(dir);
  }
}
