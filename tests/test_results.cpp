// Result records (lib/io/results.h): exact bytes of each record kind, key order, escaping,
// and the writer's append/flush/error behaviour.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/error.h"
#include "io/results.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

JobResult frame_result() {
  JobResult r;
  r.id = "walk";
  r.line = 3;
  r.sample = 1;
  r.has_frames = true;
  r.frames = {{1, 2, 3}, {4, 5, 6}};
  r.prompt_slots = 39;
  r.cached_slots = 26;
  r.queue_s = 0.5;
  r.prefill_s = 0.25;
  r.decode_s = 2;
  r.total_s = 2.75;
  r.frame_s = {1.5, 0.5};
  return r;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("loom_test_results_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_SUITE("results") {
  TEST_CASE("frame record: documented keys in documented order") {
    CHECK(result_to_json(frame_result()) ==
          R"({"id":"walk","sample":1,"status":"ok","line":3,"frames":[[1,2,3],[4,5,6]],)"
          R"("prompt_slots":39,"cached_slots":26,"timing":{"queue_s":0.5,"prefill_s":0.25,)"
          R"("decode_s":2.0,"total_s":2.75,"frame_s":[1.5,0.5]}})");
  }

  TEST_CASE("plain record: tokens and finish_reason, no frame_s") {
    JobResult r;
    r.id = "b";
    r.line = 2;
    r.tokens = {7, 8, 9};
    r.finish_reason = "eos";
    r.prompt_slots = 5;
    CHECK(result_to_json(r) ==
          R"({"id":"b","sample":0,"status":"ok","line":2,"tokens":[7,8,9],"finish_reason":"eos",)"
          R"("prompt_slots":5,"cached_slots":0,"timing":{"queue_s":0.0,"prefill_s":0.0,)"
          R"("decode_s":0.0,"total_s":0.0}})");
  }

  TEST_CASE("error record: id, status, line, error; non-UTF-8 bytes replaced, quotes escaped") {
    JobResult r;
    r.id = "line-3";
    r.line = 3;
    r.ok = false;
    r.error = "line 3: field \"id\": found \xff";
    CHECK(result_to_json(r) ==
          "{\"id\":\"line-3\",\"status\":\"error\",\"line\":3,"
          "\"error\":\"line 3: field \\\"id\\\": found \xef\xbf\xbd\"}");
  }

  TEST_CASE("ResultWriter appends one line per record and flushes each at once") {
    fs::path dir = temp_dir();
    fs::path path = dir / "out.jsonl";
    {
      ResultWriter w(path.string(), false);
      w.write(frame_result());
      // Visible to another reader before the writer closes (flushed, not buffered).
      std::string now = slurp(path);
      CHECK(now == result_to_json(frame_result()) + "\n");
      w.sync();
    }
    {
      ResultWriter w(path.string(), true);  // resume appends
      JobResult e;
      e.ok = false;
      e.id = "x";
      e.line = 9;
      e.error = "line 9: bad";
      w.write(e);
    }
    std::string all = slurp(path);
    CHECK(all == result_to_json(frame_result()) + "\n" +
                     R"({"id":"x","status":"error","line":9,"error":"line 9: bad"})" + "\n");
    {
      ResultWriter w(path.string(), false);  // a fresh run truncates
    }
    CHECK(slurp(path).empty());
    fs::remove_all(dir);
  }

  TEST_CASE("ResultWriter: unwritable paths and full disks are loom::Errors naming the path") {
    CHECK_THROWS_WITH_AS(ResultWriter("/nonexistent-dir/out.jsonl", false),
                         "cannot write results to /nonexistent-dir/out.jsonl: No such file or "
                         "directory; check the directory exists and is writable",
                         loom::Error);
    if (fs::exists("/dev/full")) {
      ResultWriter w("/dev/full", true);
      CHECK_THROWS_WITH_AS(w.write(frame_result()),
                           "cannot write results to /dev/full: No space left on device; check "
                           "free space and that the file is writable",
                           loom::Error);
    }
  }

  TEST_CASE("records round-trip through a JSON parser with the values written") {
    auto j = nlohmann::json::parse(result_to_json(frame_result()));
    CHECK(j["frames"][1][2] == 6);
    CHECK(j["timing"]["frame_s"][0] == 1.5);
    CHECK(j["sample"] == 1);
  }
  TEST_CASE("an integer id is written back as a JSON integer, int64 and uint64 alike") {
    JobResult r = frame_result();
    r.id = "8";
    r.id_is_number = true;
    CHECK(result_to_json(r).rfind(R"({"id":8,"sample":1,)", 0) == 0);
    r.id = "18446744073709551615";
    auto j = nlohmann::json::parse(result_to_json(r));
    CHECK(j["id"].is_number_unsigned());
    CHECK(j["id"].get<uint64_t>() == UINT64_MAX);
    r.id = "-9223372036854775808";
    j = nlohmann::json::parse(result_to_json(r));
    CHECK(j["id"].is_number_integer());
    CHECK(j["id"].get<int64_t>() == INT64_MIN);
    r.ok = false;
    r.id = "12";
    r.error = "line 3: bad";
    CHECK(result_to_json(r) == R"({"id":12,"status":"error","line":3,"error":"line 3: bad"})");
    r.id_is_number = false;  // the string "12" stays a string
    CHECK(result_to_json(r) == R"({"id":"12","status":"error","line":3,"error":"line 3: bad"})");
    r.id_is_number = true;
    r.id = "12x";  // not what jobs.cpp marks a number: refused, never written as a string
    CHECK_THROWS_WITH_AS(result_to_json(r),
                         "job id \"12x\" (line 3) is marked a number but is not an integer",
                         loom::Error);
  }
}
