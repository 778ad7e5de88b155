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
#include "core/fnv.h"
#include "io/jobs.h"
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

JobResult ok_record(const std::string& id, int64_t line, uint32_t sample, int frames) {
  JobResult r;
  r.id = id;
  r.sample = sample;
  r.line = line;
  r.has_frames = true;
  r.frames.assign(size_t(frames), std::vector<int32_t>(576, 7));
  return r;
}

}  // namespace

TEST_SUITE("resume") {
  TEST_CASE("no results file yet: nothing done, nothing dropped") {
    ResumeState st = scan_results("/nonexistent-loom-dir/out.jsonl");
    CHECK_FALSE(st.existed);
    CHECK_FALSE(st.done(1, 0));
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
    CHECK(st.done(1, 0));
    CHECK_FALSE(st.done(1, 1));
    CHECK(st.done(1, 2));
    CHECK_FALSE(st.done(2, 0));
    CHECK_FALSE(st.failed(1));
    CHECK(st.failed(4));
    CHECK(st.skip(4, 0));
    CHECK_FALSE(st.skip(1, 1));
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
    CHECK(st.done(1, 0));
    CHECK_FALSE(st.done(2, 0));
    CHECK(slurp(p) == good);

    // A complete record that merely lacks its newline is dropped too (it will be redone).
    std::string whole = R"({"id":"c","sample":0,"status":"ok","line":3,"frames":[]})";
    put(p, good + whole);
    st = scan_results(p.string());
    CHECK(st.dropped_bytes == int64_t(whole.size()));
    CHECK_FALSE(st.done(3, 0));
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
                       R"({"id":"a","status":"done","line":1})"
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
    put(p, R"({"id":"a","status":"ok","line":1})"
           "\n{}\n");
    CHECK_THROWS_WITH_AS(scan_results(p.string()),
                         ("results file " + p.string() +
                          " line 1: expected an \"ok\" record to carry an integer \"sample\"; only "
                          "the last line may be torn. Fix or remove that line, or write to a new "
                          "--out")
                             .c_str(),
                         loom::Error);
    put(p, R"({"id":"a","sample":0,"status":"ok"})"
           "\n{}\n");
    CHECK_THROWS_WITH_AS(scan_results(p.string()),
                         ("results file " + p.string() +
                          " line 1: expected a result record with fields \"id\" (a string or an "
                          "integer), \"status\" and \"line\"; only the last line may be torn. "
                          "Fix or remove that line, or write to a new --out")
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
          w.write(ok_record("job-" + std::to_string(j), j + 1, s, 25));
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
          if (!st.skip(j + 1, s)) w.write(ok_record(id, j + 1, s, 25));
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
  TEST_CASE("integer ids, error ids \"line-N\" and refused duplicates: kept by job line") {
    fs::path dir = temp_dir();
    fs::path p = dir / "out.jsonl";
    put(p, R"({"id":8,"sample":0,"status":"ok","line":1,"tokens":[1]})"
           "\n"
           R"({"id":"dup","sample":0,"status":"ok","line":3,"tokens":[1]})"
           "\n"
           R"({"id":"line-4","status":"error","line":4,"error":"line 4: not valid JSON"})"
           "\n"
           R"({"id":"dup","status":"error","line":9,"error":"line 9: field \"id\": ..."})"
           "\n");
    ResumeState st = scan_results(p.string());
    CHECK(st.ok_records == 2);
    CHECK(st.error_records == 2);
    CHECK(st.done(1, 0));
    // Line 9's refusal must not stop line 3 (same id) from running its other samples.
    CHECK(st.done(3, 0));
    CHECK_FALSE(st.skip(3, 1));
    CHECK(st.failed(9));
    CHECK_FALSE(st.failed(3));
    // The jobs file's ids as the reader gives them: 8 (an integer) is the id "8".
    st.match_line(1, "8");
    st.match_line(2, "no-records-yet");
    st.match_line(3, "dup");
    st.match_line(4, "line-4");
    st.match_line(9, "dup");
    CHECK_NOTHROW(st.check_all_matched("jobs.jsonl"));
    fs::remove_all(dir);
  }

  // line_hash's FNV-1a 64 with loom's offset basis (core/fnv.h; one digit short of the
  // standard one): pinned, since every record written holds values of this function.
  TEST_CASE("line_hash is FNV-1a 64 with loom's offset basis 1469598103934665603") {
    CHECK(loom::fnv1a64("") == 1469598103934665603ull);
    CHECK(loom::hex64(loom::fnv1a64("a")) == "44bd8ad473cd9906");
  }

  TEST_CASE("a job line whose text changed under the same id is refused by its line_hash") {
    fs::path dir = temp_dir();
    fs::path p = dir / "out.jsonl";
    const std::string line1 = R"({"id":"a","num_frames":2})", line2 = R"({"id":"b"})";
    const uint64_t h1 = loom::fnv1a64(line1), h2 = loom::fnv1a64(line2);
    put(p, R"({"id":"a","sample":0,"status":"ok","line":1,"line_hash":")" + loom::hex64(h1) +
               R"(","tokens":[1]})"
               "\n"
               R"({"id":"b","status":"error","line":2,"line_hash":")" +
               loom::hex64(h2) +
               R"(","error":"line 2: bad"})"
               "\n"
               R"({"id":"c","sample":0,"status":"ok","line":3,"tokens":[1]})"
               "\n");
    ResumeState st = scan_results(p.string());
    st.match_line(1, "a", h1);
    st.match_line(3, "c", 12345);  // a record without line_hash (an older loom): not checked
    const uint64_t fixed = loom::fnv1a64(R"({"id":"b","num_frames":1})");
    CHECK_THROWS_WITH_AS(st.match_line(2, "b", fixed),
                         ("results file " + p.string() +
                          " has records for line 2 (id \"b\") made from another text of that "
                          "line (line_hash " +
                          loom::hex64(h2) + ", the jobs file's is " + loom::hex64(fixed) +
                          "); --resume needs the same jobs file (or write to a new --out)")
                             .c_str(),
                         loom::Error);
    put(p,
        R"({"id":"a","sample":0,"status":"ok","line":1,"line_hash":"0123456789abcdeg","tokens":[1]})"
        "\n"
        R"({"id":"a","sample":1,"status":"ok","line":1,"tokens":[1]})"
        "\n");
    CHECK_THROWS_WITH_AS(scan_results(p.string()),
                         ("results file " + p.string() +
                          " line 1: expected \"line_hash\" to be 16 hex digits; only the last "
                          "line may be torn. Fix or remove that line, or write to a new --out")
                             .c_str(),
                         loom::Error);
  }

  TEST_CASE("a different jobs file is refused, naming both sides") {
    fs::path dir = temp_dir();
    fs::path p = dir / "out.jsonl";
    put(p, R"({"id":"a","sample":0,"status":"ok","line":1,"tokens":[1]})"
           "\n"
           R"({"id":"b","sample":0,"status":"ok","line":3,"tokens":[1]})"
           "\n"
           R"({"id":"line-5","status":"error","line":5,"error":"line 5: not valid JSON"})"
           "\n"
           R"({"id":"z","sample":0,"status":"ok","line":7,"tokens":[1]})"
           "\n");
    ResumeState st = scan_results(p.string());
    st.match_line(1, "a");
    CHECK_THROWS_WITH_AS(st.match_line(3, "c"),
                         ("results file " + p.string() +
                          " has a record for line 3 with id \"b\", but the jobs file's line 3 "
                          "has id \"c\"; --resume needs the same jobs file (or write to a new "
                          "--out)")
                             .c_str(),
                         loom::Error);
    // A line the new file fixed (it had no readable id) is another job now: refused as well.
    CHECK_THROWS_WITH_AS(st.match_line(5, "fixed"),
                         ("results file " + p.string() +
                          " has a record for line 5 with id \"line-5\", but the jobs file's line "
                          "5 has id \"fixed\"; --resume needs the same jobs file (or write to a "
                          "new --out)")
                             .c_str(),
                         loom::Error);
    // A shorter jobs file: records answer lines it never had (3 matched by now, 5 and 7 not).
    st.match_line(3, "b");
    CHECK_THROWS_WITH_AS(st.check_all_matched("-"),
                         ("results file " + p.string() +
                          " has a record for line 5 with id \"line-5\", but the jobs this run "
                          "read from stdin have no job on line 5 (nor on 1 more lines with "
                          "records); --resume needs the same jobs file (or write to a new --out)")
                             .c_str(),
                         loom::Error);
    // One job line under two ids in the results themselves.
    put(p, R"({"id":"a","sample":0,"status":"ok","line":1,"tokens":[1]})"
           "\n"
           R"({"id":"b","sample":1,"status":"ok","line":1,"tokens":[1]})"
           "\n");
    CHECK_THROWS_WITH_AS(scan_results(p.string()),
                         ("results file " + p.string() +
                          " line 2: a record for job line 1 with id \"b\", but an earlier record "
                          "for that job line has id \"a\"; the file mixes the results of "
                          "different jobs files. Write to a new --out")
                             .c_str(),
                         loom::Error);
    CHECK(slurp(p).size() > 100);  // a whole record is never cut off as if torn
    fs::remove_all(dir);
  }

  TEST_CASE("the run loop: each line read is matched, on a file as on a stream") {
    fs::path dir = temp_dir();
    fs::path out = dir / "out.jsonl", a = dir / "a.jsonl", b = dir / "b.jsonl";
    auto job = [](const std::string& id) {
      return "{\"id\":" + id + ",\"prompt_token_ids\":[1],\"max_tokens\":2}\n";
    };
    put(a, job("\"x\"") + "\n" + job("8") + "not json\n" + job("\"y\""));
    put(b, job("\"x\"") + "\n" + job("\"8\"") + "not json\n" + job("\"other\""));
    ModelSpec spec;
    spec.vocab = 1000;
    spec.max_positions = 64;
    // The first run wrote its records for lines 1, 3 and 4, then was killed.
    {
      ResultWriter w(out.string(), false);
      JobReader reader(a.string(), spec, JobDefaults{});
      Job j;
      JobError e;
      bool ok = false;
      for (int n = 0; n < 3 && reader.next(j, e, ok); ++n) {
        JobResult r;
        r.id = ok ? j.id : e.id;
        r.id_is_number = ok ? j.id_is_number : e.id_is_number;
        r.line = ok ? j.line : e.line;
        r.ok = ok;
        r.error = e.message;
        w.write(r);
      }
    }
    CHECK(slurp(out).find(R"({"id":8,"sample":0,"status":"ok","line":3,)") != std::string::npos);
    auto resume = [&](const std::string& jobs) {
      ResumeState st = scan_results(out.string());
      JobReader reader(jobs, spec, JobDefaults{});
      Job j;
      JobError e;
      bool ok = false;
      int64_t lines = 0;
      while (reader.next(j, e, ok)) {
        st.match_line(ok ? j.line : e.line, ok ? j.id : e.id);
        ++lines;
      }
      st.check_all_matched(jobs);
      return lines;
    };
    CHECK(resume(a.string()) == 4);
    CHECK(resume(b.string()) == 4);  // "8" is the id 8; line 5 had no record yet
    put(b, job("\"x\"") + "\n" + job("9") + "not json\n");
    CHECK_THROWS_WITH_AS(resume(b.string()),
                         ("results file " + out.string() +
                          " has a record for line 3 with id \"8\", but the jobs file's line 3 "
                          "has id \"9\"; --resume needs the same jobs file (or write to a new "
                          "--out)")
                             .c_str(),
                         loom::Error);
    // A stream (a pipe on stdin) is matched line by line as it is read: no second pass.
    put(b, job("\"x\""));
    int saved = dup(0);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    std::string text = slurp(b);
    REQUIRE(write(fds[1], text.data(), text.size()) == ssize_t(text.size()));
    close(fds[1]);
    dup2(fds[0], 0);
    close(fds[0]);
    std::string msg;
    try {
      resume("-");
    } catch (const loom::Error& e) {
      msg = e.what();
    }
    dup2(saved, 0);
    close(saved);
    CHECK(msg == "results file " + out.string() +
                     " has a record for line 3 with id \"8\", but the jobs this run read from "
                     "stdin have no job on line 3 (nor on 1 more lines with records); --resume "
                     "needs the same jobs file (or write to a new --out)");
    fs::remove_all(dir);
  }
}
