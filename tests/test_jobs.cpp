// JobReader and parse_job_line (lib/io/jobs.h): every malformed line gives one exact message,
// good lines beside them parse to the values written, line numbers count blank lines, shards
// split the non-blank lines j mod N, and reading is streamed (peak RSS grows by the id index
// only).
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/jobs.h"

#include "tiny_spec.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// The tiny frame model of the tests: P=10 image + A=3 action slots, action_dim 3, T=6.
ModelSpec plain_spec() {
  ModelSpec s;
  s.architecture = "LlamaForCausalLM";
  s.vocab = 1000;
  s.max_positions = 64;
  return s;
}

// $F1: one good context frame; $A2: 6 action rows (1 context + 1 generated frame); $FF: a
// byte that is not UTF-8.
std::string expand(std::string s) {
  const std::pair<std::string, std::string> subs[] = {
      {"$F1", "[1,2,3,4,5,6,7,8,9,10,-3,-3,-3]"},
      {"$A2", "[[0,1,0.5],[0,1,1],[0,1,1.5],[0,1,0.5],[0,1,1],[0,1,1.5]]"},
      {"$FF", "\xff"}};
  for (auto& [from, to] : subs) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }
  return s;
}

struct BadCase {
  const char* line;
  const char* message;  // after "line N: "
};

// Frame model: each line has exactly one defect.
const BadCase kBadFrameJobs[] = {
    {R"(not json)",
     R"(not valid JSON (unexpected not): expected one JSON object per line, found "not json")"},
    {R"([1,2])", R"(expected a JSON object per line, found a list of 2 items)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"foo":1})",
     R"(unknown field "foo": expected one of "id", "prompt_token_ids", "actions", "num_frames", "overlap", "sampling", "num_samples", found "foo")"},
    {R"({"id":"a","id":"b","prompt_token_ids":$F1,"actions":$A2,"num_frames":1})",
     R"(field "id": expected each field once, found it a second time)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"max_tokens":5})",
     R"(field "max_tokens" is for plain (non-frame) models: expected "num_frames" for this frame model, found "max_tokens")"},
    {R"({"id":1.5,"prompt_token_ids":$F1,"actions":$A2,"num_frames":1})",
     R"(field "id": expected a string or an integer, found 1.5)"},
    {R"({"id":"","prompt_token_ids":$F1,"actions":$A2,"num_frames":1})",
     R"(field "id": expected a non-empty string or an integer, found "")"},
    {R"({"id":"a","actions":$A2,"num_frames":1})",
     R"(missing field "prompt_token_ids": expected a list of token ids, found no such field)"},
    {R"({"id":"a","prompt_token_ids":"abc","actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids": expected a list of token ids, found "abc")"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9,10,-3,-3,-3,4],"actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids": expected a positive multiple of 13 ids (frames of 10 image + 3 action slots), found 14)"},
    {R"({"id":"a","prompt_token_ids":[],"actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids": expected a positive multiple of 13 ids (frames of 10 image + 3 action slots), found 0)"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,-3,6,7,8,9,10,-3,-3,-3],"actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids" index 4 (frame 0, image slot 4): expected an image token id in [0, 1000), found -3 (the action placeholder))"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9,10,-3,57,-3],"actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids" index 11 (frame 0, action slot 1): expected the placeholder -3, found 57)"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9,1000,-3,-3,-3],"actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids" index 9 (frame 0, image slot 9): expected an image token id in [0, 1000), found 1000)"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9,1.5,-3,-3,-3],"actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids" index 9: expected an integer token id, found 1.5)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2})",
     R"(missing field "num_frames": expected an integer in [1, 100000], found no such field)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":0})",
     R"(field "num_frames": expected an integer in [1, 100000], found 0)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":100001})",
     R"(field "num_frames": expected an integer in [1, 100000], found 100001)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":"2"})",
     R"(field "num_frames": expected an integer in [1, 100000], found "2")"},
    {R"({"id":"a","prompt_token_ids":$F1,"num_frames":1})",
     R"(missing field "actions": expected 6 or 3 rows of 3 numbers (3 action slots x (1 context + 1 generated frames); the last frame's actions are optional), found no such field)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,1,1],[0,1,1.5],[0,1,0.5],[0,1,1]],"num_frames":1})",
     R"(field "actions": expected 6 or 3 rows of 3 numbers (3 action slots x (1 context + 1 generated frames); the last frame's actions are optional), found 5 rows)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,1],[0,1,1.5]],"num_frames":1})",
     R"(field "actions" row 1: expected 3 numbers, found 2)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,1,"nan"],[0,1,1.5]],"num_frames":1})",
     R"(field "actions" row 1 column 2: expected a finite number (JSON has no NaN or Infinity), found "nan")"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,1,1e999],[0,1,1.5]],"num_frames":1})",
     R"(field "actions": expected a number that fits in 64 bits (finite, at most ~1.8e308 and integers within [-2^63, 2^64)), found 1e999)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,1,1e300],[0,1,1.5]],"num_frames":1})",
     R"(field "actions" row 1 column 2: expected a finite number within float range (|x| <= 3.4e38), found 1e+300)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,NaN,1],[0,1,1.5]],"num_frames":1})",
     R"(field "actions": expected a JSON number, string, true, false or null (JSON has no NaN or Infinity), found NaN)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],5,[0,1,1.5]],"num_frames":1})",
     R"(field "actions" row 1: expected a list of 3 numbers, found 5)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"overlap":0})",
     R"(field "overlap": expected an integer in [1, 5], found 0)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"overlap":6})",
     R"(field "overlap": expected an integer in [1, 5] (the model's temporal table has 6 rows), found 6)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":0.9})",
     R"(field "sampling": expected an object with one of "temperature", "top_k", "top_p", "seed", found 0.9)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"temp":0.9}})",
     R"(field "sampling": unknown field "temp": expected one of "temperature", "top_k", "top_p", "seed", found "temp")"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"temperature":-1}})",
     R"(field "sampling.temperature": expected 0 (greedy) or a number in [1e-05, 3.40282e+38], found -1)"},
    // logit / T overflows fp32 below 1e-05: NaN garbage instead of near-greedy tokens.
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"temperature":1e-40}})",
     R"(field "sampling.temperature": expected 0 (greedy) or a number in [1e-05, 3.40282e+38], found 1e-40)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"top_p":0}})",
     R"(field "sampling.top_p": expected a number in (0, 1], found 0)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"top_k":2.5}})",
     R"(field "sampling.top_k": expected an integer in [0, 2147483647], found 2.5)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"seed":-1}})",
     R"(field "sampling.seed": expected an integer in [0, 2^64), found -1)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"seed":18446744073709551616}})",
     R"(field "seed": expected a number that fits in 64 bits (finite, at most ~1.8e308 and integers within [-2^63, 2^64)), found 18446744073709551616)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"num_samples":0})",
     R"(field "num_samples": expected an integer in [1, 1024], found 0)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"num_samples":2000})",
     R"(field "num_samples": expected an integer in [1, 1024], found 2000)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,Infinity]],"num_frames":1})",
     R"(field "actions": expected a JSON number, string, true, false or null (JSON has no NaN or Infinity), found Infinity)"},
    {R"({"id":"a","prompt_token_ids":[1,2)",
     R"(not valid JSON (broken structure (a missing or extra comma, colon, brace, bracket or quote)): expected one JSON object per line, found "{\"id\":\"a\",\"prompt_token_ids\":[1,2")"},
    {"{\"id\":\"a$FF\"}",
     R"(not valid JSON (invalid UTF-8): expected one JSON object per line, found "{\"id\":\"a\xff\"}")"},
    {R"({} x)",
     R"(not valid JSON (unexpected x): expected one JSON object per line, found "{} x")"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9,10,-3,-3,-3,1,2,3,4,5,6,7,8,9,10,-3,-3,-3,1,2,3,4,5,6,7,8,9,10,-3,-3,-3,1,2,3,4,5,6,7,8,9,10,-3,-3,-3,1,2,3,4,5,6,7,8,9,10,-3,-3,-3,1,2,3,4,5,6,7,8,9,10,-3,-3,-3,1,2,3,4,5,6,7,8,9,10,-3,-3,-3],"actions":[],"num_frames":1})",
     R"(field "prompt_token_ids": expected at most 6 context frames (78 ids; the model's temporal table has 6 rows), found 7 frames (91 ids))"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9,10,-3,-1,-3],"actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids" index 11 (frame 0, action slot 1): expected the placeholder -3, found -1)"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9,-7,-3,-3,-3],"actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids" index 9 (frame 0, image slot 9): expected an image token id in [0, 1000), found -7)"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9,"10",-3,-3,-3],"actions":$A2,"num_frames":1})",
     R"(field "prompt_token_ids" index 9: expected an integer token id, found "10")"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":{"rows":1},"num_frames":1})",
     R"(field "actions": expected 6 or 3 rows of 3 numbers (3 action slots x (1 context + 1 generated frames); the last frame's actions are optional), found an object)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,1,1,7],[0,1,1.5]],"num_frames":1})",
     R"(field "actions" row 1: expected 3 numbers, found 4)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,1,true],[0,1,1.5]],"num_frames":1})",
     R"(field "actions" row 1 column 2: expected a finite number (JSON has no NaN or Infinity), found true)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"top_p":1.5}})",
     R"(field "sampling.top_p": expected a number in (0, 1], found 1.5)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"top_k":-1}})",
     R"(field "sampling.top_k": expected an integer in [0, 2147483647], found -1)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"temperature":"hot"}})",
     R"(field "sampling.temperature": expected a number, found "hot")"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"seed":1.5}})",
     R"(field "sampling.seed": expected an integer in [0, 2^64), found 1.5)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"seed":1,"seed":2}})",
     R"(field "sampling.seed": expected each field once, found it a second time)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"num_samples":2.0})",
     R"(field "num_samples": expected an integer in [1, 1024], found 2.0)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"ignore_eos":true})",
     R"(field "ignore_eos" is for plain (non-frame) models: expected "num_frames" for this frame model, found "ignore_eos")"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,1,1],[0,1,1.5]],"num_frames":2})",
     R"(field "actions": expected 9 or 6 rows of 3 numbers (3 action slots x (1 context + 2 generated frames); the last frame's actions are optional), found 3 rows)"},
    {R"({"id":{"name":"a"},"prompt_token_ids":$F1,"actions":$A2,"num_frames":1})",
     R"(field "id": expected a string or an integer, found an object)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1,"sampling":{"temperature":1e39}})",
     R"(field "sampling.temperature": expected 0 (greedy) or a number in [1e-05, 3.40282e+38], found 1e+39)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":$A2,"num_frames":1.0e2})",
     R"(field "num_frames": expected an integer in [1, 100000], found 100.0)"},
    {R"({"id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9,99999999999999999999,-3,-3,-3],"num_frames":1})",
     R"(field "prompt_token_ids": expected a number that fits in 64 bits (finite, at most ~1.8e308 and integers within [-2^63, 2^64)), found 99999999999999999999)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,-inf]],"num_frames":1})",
     R"(field "actions": expected a JSON number, string, true, false or null (JSON has no NaN or Infinity), found -inf)"},
    {R"({"id":"a","prompt_token_ids":$F1,"actions":[[0,1,0.5],[0,1,1],[0,1,"Infinity"]],"num_frames":1})",
     R"(field "actions" row 2 column 2: expected a finite number (JSON has no NaN or Infinity), found "Infinity")"},
};

// Plain model.
const BadCase kBadPlainJobs[] = {
    // A lone UTF-16 surrogate escape (os.listdir's names of non-UTF-8 files): loom.Job took it.
    {R"({"id":"\ud800"})",
     R"(not valid JSON (bad escape in a string): expected one JSON object per line, found "{\"id\":\"\\ud800\"}")"},
    {R"({"id":"p","prompt_token_ids":[1,2,3],"max_tokens":4,"actions":[[0,0,0]]})",
     R"(field "actions" is for frame models: expected "max_tokens" for this plain model, found "actions")"},
    {R"({"id":"p","prompt_token_ids":[1,-3,3],"max_tokens":4})",
     R"(field "prompt_token_ids" index 1: expected a token id in [0, 1000), found -3 (the action placeholder; this model has no action slots))"},
    {R"({"id":"p","prompt_token_ids":[1,2,3]})",
     R"(missing field "max_tokens": expected an integer >= 1, found no such field)"},
    {R"({"id":"p","prompt_token_ids":[1,2,3],"max_tokens":0})",
     R"(field "max_tokens": expected an integer in [1, 61], found 0)"},
    {R"({"id":"p","prompt_token_ids":[1,2,3],"max_tokens":62})",
     R"(field "max_tokens": expected at most 61 (max_position_embeddings 64 - 3 prompt tokens), found 62)"},
    {R"({"id":"p","prompt_token_ids":[1,2,3,4,5,6,7,8,9,10,1,2,3,4,5,6,7,8,9,10,1,2,3,4,5,6,7,8,9,10,1,2,3,4,5,6,7,8,9,10,1,2,3,4,5,6,7,8,9,10,1,2,3,4,5,6,7,8,9,10,1,2,3,4],"max_tokens":1})",
     R"(field "prompt_token_ids": expected at most 63 ids (max_position_embeddings 64 leaves room for 1 new token), found 64)"},
    {R"({"id":"p","prompt_token_ids":[1,2,3],"max_tokens":4,"ignore_eos":"yes"})",
     R"(field "ignore_eos": expected true or false, found "yes")"},
    {R"({"id":"p","prompt_token_ids":[1,2,3],"max_tokens":4,"bogus":1})",
     R"(unknown field "bogus": expected one of "id", "prompt_token_ids", "max_tokens", "ignore_eos", "sampling", "num_samples", found "bogus")"},
    {R"({"id":"p","prompt_token_ids":[],"max_tokens":4})",
     R"(field "prompt_token_ids": expected at least 1 token id, found none)"},
    {R"({"id":"p","prompt_token_ids":[1,2,3],"max_tokens":4,"num_frames":3})",
     R"(field "num_frames" is for frame models: expected "max_tokens" for this plain model, found "num_frames")"},
    {R"({"id":"p","prompt_token_ids":[1,2,3],"max_tokens":4.0})",
     R"(field "max_tokens": expected an integer in [1, 61], found 4.0)"},
    {R"({"id":"p","prompt_token_ids":[1,2,3],"max_tokens":4,"overlap":2})",
     R"(field "overlap" is for frame models: expected "max_tokens" for this plain model, found "overlap")"},
    {R"({"id":"p","prompt_token_ids":[1,2,1000],"max_tokens":4})",
     R"(field "prompt_token_ids" index 2: expected a token id in [0, 1000), found 1000)"},
};

std::string error_of(const std::string& line, const ModelSpec& spec, int64_t n = 7) {
  Job job;
  JobError error;
  JobDefaults defaults;
  bool ok = parse_job_line(line, n, spec, defaults, job, error);
  if (ok) return "(parsed fine)";
  CHECK(error.line == n);
  return error.message;
}

size_t peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return size_t(u.ru_maxrss);
}

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("loom_test_jobs_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

// A generated jobs file of `n` frame jobs (2 context frames, 4 generated each).
void write_jobs(const fs::path& path, int64_t n) {
  std::ofstream out(path);
  const std::string frame = "1,2,3,4,5,6,7,8,9,10,-3,-3,-3";
  std::string actions = "[";
  for (int r = 0; r < 18; ++r) actions += r ? ",[0.1,1,0.5]" : "[0.1,1,0.5]";
  actions += "]";
  for (int64_t i = 0; i < n; ++i) {
    out << "{\"id\":\"job-" << i << "\",\"prompt_token_ids\":[" << frame << "," << frame
        << "],\"actions\":" << actions << ",\"num_frames\":4,\"sampling\":{\"seed\":" << i
        << "}}\n";
  }
}

int64_t read_all(const fs::path& path, int64_t& errors) {
  JobReader reader(path.string(), loom::test::tiny_frame_spec(), JobDefaults{});
  Job job;
  JobError error;
  bool ok = false;
  int64_t jobs = 0;
  errors = 0;
  while (reader.next(job, error, ok)) ok ? ++jobs : ++errors;
  return jobs;
}

}  // namespace

TEST_SUITE("jobs") {
  TEST_CASE("malformed frame-model job lines give their exact messages") {
    ModelSpec spec = loom::test::tiny_frame_spec();
    CHECK(std::size(kBadFrameJobs) >= 30);
    for (const BadCase& c : kBadFrameJobs) {
      std::string line = expand(c.line);
      CAPTURE(line);
      CHECK(error_of(line, spec) == std::string("line 7: ") + c.message);
    }
  }

  TEST_CASE("malformed plain-model job lines give their exact messages") {
    ModelSpec spec = plain_spec();
    for (const BadCase& c : kBadPlainJobs) {
      std::string line = expand(c.line);
      CAPTURE(line);
      CHECK(error_of(line, spec) == std::string("line 7: ") + c.message);
    }
  }

  TEST_CASE("an error carries the job's id once it could be read") {
    Job job;
    JobError error;
    std::string line = expand(R"({"id":"cam-3","prompt_token_ids":$F1,"num_frames":0})");
    REQUIRE_FALSE(
        parse_job_line(line, 12, loom::test::tiny_frame_spec(), JobDefaults{}, job, error));
    CHECK(error.id == "cam-3");
    CHECK_FALSE(error.id_is_number);
    CHECK(error.line == 12);
    line = expand(R"({"id":18446744073709551615,"prompt_token_ids":$F1,"num_frames":0})");
    REQUIRE_FALSE(
        parse_job_line(line, 12, loom::test::tiny_frame_spec(), JobDefaults{}, job, error));
    CHECK(error.id == "18446744073709551615");
    CHECK(error.id_is_number);
    REQUIRE_FALSE(parse_job_line("{\"id\":5.5}", 13, loom::test::tiny_frame_spec(), JobDefaults{},
                                 job, error));
    CHECK(error.id == "line-13");
    CHECK_FALSE(error.id_is_number);
    REQUIRE_FALSE(parse_job_line("{\"id\":\"x\",", 14, loom::test::tiny_frame_spec(), JobDefaults{},
                                 job, error));
    CHECK(error.id == "line-14");
  }

  TEST_CASE("a good frame job parses to the values written") {
    std::string line = R"({"id":"walk","prompt_token_ids":[0,1,2,3,4,5,6,7,8,999,-3,-3,-3,)"
                       R"(9,8,7,6,5,4,3,2,1,0,-3,-3,-3],"actions":[[0.5,1,0.45],[0.25,2,0.95],)"
                       R"([-1e-3,3,1.45],[1,4,1.95],[2,5,2.45],[3,6,2.95],[4,7,3.45],[5,8,3.95],)"
                       R"([6,9,4.45],[7,10,4.95],[8,11,5.45],[9,12,5.95]],"num_frames":3,)"
                       R"("overlap":2,"sampling":{"temperature":0.9,"top_k":0,"top_p":0.95,)"
                       R"("seed":18446744073709551615},"num_samples":4})";
    Job job;
    JobError error;
    REQUIRE(parse_job_line(line, 3, loom::test::tiny_frame_spec(), JobDefaults{}, job, error));
    CHECK(job.id == "walk");
    CHECK(job.line == 3);
    REQUIRE(job.prompt.size() == 26);
    CHECK(job.prompt[9] == 999);
    CHECK(job.prompt[10] == -3);
    CHECK(job.prompt[13] == 9);
    CHECK(job.context_frames == 2);
    CHECK(job.num_frames == 3);
    CHECK(job.action_rows == 12);  // 3 x (2 + 3 - 1): the last frame's actions left out
    REQUIRE(job.actions.size() == 36);
    CHECK(job.actions[0] == 0.5f);
    CHECK(job.actions[6] == -1e-3f);
    CHECK(job.actions[35] == 5.95f);
    CHECK(job.overlap == 2);
    CHECK(job.sampling.temperature == 0.9f);
    CHECK(job.sampling.top_k == 0);
    CHECK(job.sampling.top_p == 0.95f);
    CHECK(job.sampling.seed == 18446744073709551615ull);
    CHECK(job.num_samples == 4);
  }

  TEST_CASE("defaults fill what a job leaves out; an integer id is kept as text") {
    JobDefaults d;
    d.sampling.temperature = 0.0f;
    d.sampling.top_k = 7;
    d.sampling.seed = 42;
    d.overlap = 4;
    std::string line = expand(R"({"id":123456789012,"prompt_token_ids":$F1,"actions":$A2,)"
                              R"("num_frames":1,"sampling":{"top_p":0.5},"num_samples":null})");
    Job job;
    JobError error;
    REQUIRE(parse_job_line(line, 1, loom::test::tiny_frame_spec(), d, job, error));
    CHECK(job.id == "123456789012");
    CHECK(job.id_is_number);
    CHECK(job.action_rows == 6);
    CHECK(job.overlap == 4);
    CHECK(job.sampling.temperature == 0.0f);
    CHECK(job.sampling.top_k == 7);
    CHECK(job.sampling.top_p == 0.5f);
    CHECK(job.sampling.seed == 42);
    CHECK(job.num_samples == 1);

    // No id: "line-N". A default overlap above T-1 is fitted to the table, not an error.
    d.overlap = 9;
    line = expand(R"({"prompt_token_ids":$F1,"actions":$A2,"num_frames":1})");
    REQUIRE(parse_job_line(line, 5, loom::test::tiny_frame_spec(), d, job, error));
    CHECK(job.id == "line-5");
    CHECK_FALSE(job.id_is_number);
    CHECK(job.overlap == 5);
  }

  TEST_CASE("--overlap above T-1 is refused naming option, value and range, never clamped") {
    JobDefaults d;
    d.overlap = 6;  // T = 6 frames a round: at most 5 carried
    d.overlap_given = true;
    CHECK_THROWS_WITH_AS(check_job_defaults(loom::test::tiny_frame_spec(), d),
                         "--overlap 6: expected an integer in [1, 5] for this model (its temporal "
                         "table has 6 rows), found 6",
                         loom::Error);
    // The reader checks before it opens the file: the option is wrong whatever the jobs say.
    CHECK_THROWS_WITH_AS(JobReader("/nonexistent/jobs.jsonl", loom::test::tiny_frame_spec(), d),
                         "--overlap 6: expected an integer in [1, 5] for this model (its temporal "
                         "table has 6 rows), found 6",
                         loom::Error);
    ModelSpec one = loom::test::tiny_frame_spec();
    one.temporal_rows = 1;
    d.overlap = 1;
    CHECK_THROWS_WITH_AS(check_job_defaults(one, d),
                         "--overlap 1: expected no --overlap for this model (its temporal table "
                         "has 1 row, so rounds cannot carry frames), found 1",
                         loom::Error);

    // In range it is used as given; on a plain model it has nothing to act on.
    d.overlap = 5;
    CHECK_NOTHROW(check_job_defaults(loom::test::tiny_frame_spec(), d));
    Job job;
    JobError error;
    std::string line = expand(R"({"prompt_token_ids":$F1,"actions":$A2,"num_frames":1})");
    REQUIRE(parse_job_line(line, 1, loom::test::tiny_frame_spec(), d, job, error));
    CHECK(job.overlap == 5);
    d.overlap = 99;
    CHECK_NOTHROW(check_job_defaults(plain_spec(), d));
  }

  TEST_CASE("a good plain job parses to the values written") {
    std::string line = R"({"id":"p","prompt_token_ids":[1,2,3],"max_tokens":61,"ignore_eos":true,)"
                       R"("num_samples":3,"sampling":{"temperature":0.5,"top_k":5,"top_p":0.9,)"
                       R"("seed":12}})";
    Job job;
    JobError error;
    REQUIRE(parse_job_line(line, 2, plain_spec(), JobDefaults{}, job, error));
    CHECK(job.prompt == std::vector<int32_t>{1, 2, 3});
    CHECK(job.max_tokens == 61);  // 3 + 61 = max_position_embeddings 64
    CHECK(job.ignore_eos);
    CHECK(job.num_samples == 3);
    CHECK(job.sampling.top_k == 5);
    CHECK(job.sampling.seed == 12);
    CHECK(job.actions.empty());
    CHECK(job.num_frames == 0);
  }

  TEST_CASE("JobReader counts blank lines, strips CR and BOM, and shards j mod N") {
    fs::path dir = temp_dir();
    fs::path path = dir / "mixed.jsonl";
    {
      std::ofstream out(path, std::ios::binary);
      std::string good =
          expand(R"({"id":"ID","prompt_token_ids":$F1,"actions":$A2,"num_frames":1})");
      auto with_id = [&](const char* id) {
        std::string s = good;
        return s.replace(s.find("ID"), 2, id);
      };
      out << "\xEF\xBB\xBF" << with_id("a") << "\r\n";  // line 1
      out << "\n   \t\n";                               // lines 2-3 blank
      out << "{\"id\":\"b\",\"bogus\":1}\n";            // line 4: error
      out << with_id("c") << "\n";                      // line 5
      out << "\r\n";                                    // line 6 blank
      out << with_id("d");                              // line 7, no final newline
    }
    Job job;
    JobError error;
    bool ok = false;
    std::vector<std::string> seen;
    {
      JobReader reader(path.string(), loom::test::tiny_frame_spec(), JobDefaults{});
      while (reader.next(job, error, ok)) {
        seen.push_back(ok ? job.id + "@" + std::to_string(job.line)
                          : "error:" + error.id + "@" + std::to_string(error.line));
      }
      CHECK(reader.lines_read() == 7);
      CHECK(reader.records_read() == 4);
    }
    CHECK(seen == std::vector<std::string>{"a@1", "error:b@4", "c@5", "d@7"});

    // Shards: non-blank lines j = 0 (a), 1 (b), 2 (c), 3 (d).
    std::vector<std::vector<std::string>> shards(3);
    for (int k = 0; k < 3; ++k) {
      JobReader reader(path.string(), loom::test::tiny_frame_spec(), JobDefaults{});
      reader.set_shard(k, 3);
      while (reader.next(job, error, ok)) shards[k].push_back(ok ? job.id : error.id);
    }
    CHECK(shards[0] == std::vector<std::string>{"a", "d"});
    CHECK(shards[1] == std::vector<std::string>{"b"});
    CHECK(shards[2] == std::vector<std::string>{"c"});

    JobReader reader(path.string(), loom::test::tiny_frame_spec(), JobDefaults{});
    CHECK_THROWS_WITH_AS(reader.set_shard(3, 3), "shard 3/3: expected 0 <= K < N", loom::Error);
    fs::remove_all(dir);
  }

  TEST_CASE("JobReader: an unreadable file is a loom::Error naming it") {
    CHECK_THROWS_WITH_AS(
        JobReader("/nonexistent/jobs.jsonl", loom::test::tiny_frame_spec(), JobDefaults{}),
        "cannot read jobs from /nonexistent/jobs.jsonl: No such file or "
        "directory; check the path (or pass - for stdin)",
        loom::Error);
  }

  TEST_CASE("JobReader: a line longer than the limit is one error record, the next line reads") {
    fs::path dir = temp_dir();
    fs::path path = dir / "long.jsonl";
    {
      std::ofstream out(path, std::ios::binary);
      out << "{\"id\":\"" << std::string(kMaxJobLineBytes + 10, 'x') << "\"}\n";
      out << expand(R"({"id":"after","prompt_token_ids":$F1,"actions":$A2,"num_frames":1})")
          << "\n";
    }
    JobReader reader(path.string(), loom::test::tiny_frame_spec(), JobDefaults{});
    Job job;
    JobError error;
    bool ok = true;
    REQUIRE(reader.next(job, error, ok));
    CHECK_FALSE(ok);
    CHECK(error.message ==
          "line 1: line too long: expected at most 64 MiB per job line, found more");
    REQUIRE(reader.next(job, error, ok));
    CHECK(ok);
    CHECK(job.id == "after");
    CHECK(job.line == 2);
    CHECK_FALSE(reader.next(job, error, ok));
    fs::remove_all(dir);
  }

  TEST_CASE("JobReader: lines around the 64 KiB read chunk are read whole") {
    fs::path dir = temp_dir();
    fs::path path = dir / "chunks.jsonl";
    const std::string body = expand(R"("prompt_token_ids":$F1,"actions":$A2,"num_frames":1})");
    const size_t lengths[] = {65534, 65535, 65536, 65537, 131071, 131072, 131073, 200000};
    {
      std::ofstream out(path, std::ios::binary);
      for (size_t n : lengths) {
        std::string head = "{\"id\":\"" + std::to_string(n) + "\",";
        out << head << std::string(n - head.size() - body.size(), ' ') << body << "\n";
      }
    }
    JobReader reader(path.string(), loom::test::tiny_frame_spec(), JobDefaults{});
    Job job;
    JobError error;
    bool ok = false;
    for (size_t i = 0; i < std::size(lengths); ++i) {
      REQUIRE(reader.next(job, error, ok));
      CAPTURE(lengths[i]);
      CHECK(ok);
      CHECK(job.id == std::to_string(lengths[i]));
      CHECK(job.line == int64_t(i) + 1);
    }
    CHECK_FALSE(reader.next(job, error, ok));
    fs::remove_all(dir);
  }

  TEST_CASE("testdata/jobs/bad_tiny_v1.jsonl: each bad line gives its expected error") {
    std::string path = std::string(LOOM_TESTDATA) + "/jobs/bad_tiny_v1.jsonl";
    std::ifstream expected_file(std::string(LOOM_TESTDATA) + "/jobs/bad_tiny_v1.expected.jsonl");
    REQUIRE(expected_file.is_open());
    std::map<int64_t, std::string> expected;  // line → error_contains
    for (std::string s; std::getline(expected_file, s);) {
      auto j = nlohmann::json::parse(s);
      expected[j.at("line").get<int64_t>()] = j.at("error_contains").get<std::string>();
    }
    REQUIRE(expected.size() >= 10);
    JobReader reader(path, loom::test::tiny_frame_spec(), JobDefaults{});
    Job job;
    JobError error;
    bool ok = false;
    int good = 0, bad = 0;
    while (reader.next(job, error, ok)) {
      if (ok) {
        CAPTURE(job.line);
        CHECK(expected.count(job.line) == 0);
        ++good;
        continue;
      }
      ++bad;
      CAPTURE(error.message);
      REQUIRE(expected.count(error.line) == 1);
      CHECK(error.message.find(expected[error.line]) != std::string::npos);
    }
    CHECK(bad == int(expected.size()));
    CHECK(good >= 3);
  }

  TEST_CASE("JobReader streams: peak RSS grows by the id index only from 10k to 100k lines") {
    fs::path dir = temp_dir();
    write_jobs(dir / "10k.jsonl", 10000);
    write_jobs(dir / "100k.jsonl", 100000);
    // Measured in a forked child: its peak starts at this process's current RSS, not at the
    // peak the other tests of this binary reached (the long-line test holds 64 MiB).
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int64_t errors = 0, v[5] = {0, 0, 0, 0, 0};
      v[0] = read_all(dir / "10k.jsonl", errors);
      v[1] = int64_t(peak_rss_kib());
      v[2] = read_all(dir / "100k.jsonl", v[4]);
      v[3] = int64_t(peak_rss_kib());
      v[4] += errors;
      ssize_t w = write(fds[1], v, sizeof v);
      _exit(w == ssize_t(sizeof v) ? 0 : 1);
    }
    close(fds[1]);
    int64_t v[5] = {0, 0, 0, 0, 0};
    ssize_t got = read(fds[0], v, sizeof v);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(got == ssize_t(sizeof v));
    CHECK(v[0] == 10000);
    CHECK(v[2] == 100000);
    CHECK(v[4] == 0);
    MESSAGE("peak RSS after 10k lines: ", v[1], " KiB; after 100k lines: ", v[3], " KiB");
    // The 100k file is ~48 MB; holding it (or its jobs) would add tens of MiB. What may grow
    // is the duplicate-id index (job_ids.h): ~24 bytes an id and a 4-byte slot of a table at
    // most half full, so at most 40 bytes a line.
    CHECK(v[3] - v[1] < 2048 + 90000 * 40 / 1024);
    fs::remove_all(dir);
  }

  // Measurement for reports: LOOM_JOBS_RSS_FILE=/tmp/jobs_1m.jsonl test_jobs -tc="*RSS of*"
  TEST_CASE("JobReader: peak RSS of reading LOOM_JOBS_RSS_FILE (skipped when unset)") {
    const char* path = std::getenv("LOOM_JOBS_RSS_FILE");
    if (!path) return;
    int64_t errors = 0;
    int64_t jobs = read_all(path, errors);
    MESSAGE(std::string(path), ": ", jobs, " jobs, ", errors, " errors, peak RSS ", peak_rss_kib(),
            " KiB");
  }
}

// ---- Action-token models: a frame's actions are vocabulary ids (ActionProjection::Tokens) ----

namespace {

// P = 4 image + A = 2 action ids a frame, T = 3 frames a round, vocab 100 of which the table
// makes [0, 90) the image ids (logit range): action ids are 90..99.
ModelSpec token_spec() {
  ModelSpec s;
  s.architecture = "LlamaActionTokensForCausalLM";
  s.vocab = 100;
  s.image_tokens = 4;
  s.action_tokens = 2;
  s.temporal_rows = 3;
  s.max_positions = 18;
  s.logit_end = 90;
  s.action_projection = ActionProjection::Tokens;
  return s;
}

// $T1: one context frame with its action ids in place; $R2: 2 rows of action ids.
std::string expand_tokens(std::string s) {
  const std::pair<std::string, std::string> subs[] = {{"$T1", "[1,2,3,4,90,91]"},
                                                      {"$R2", "[[92,93],[94,95]]"}};
  for (auto& [from, to] : subs)
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  return s;
}

const BadCase kBadActionTokenJobs[] = {
    {R"({"id":"t","prompt_token_ids":$T1,"action_token_ids":$R2,"num_frames":2,"foo":1})",
     R"(unknown field "foo": expected one of "id", "prompt_token_ids", "action_token_ids", "num_frames", "overlap", "sampling", "num_samples", found "foo")"},
    {R"({"id":"t","prompt_token_ids":$T1,"actions":[[0,1,0.5]],"num_frames":2})",
     R"(field "actions" holds action rows of numbers: expected "action_token_ids" for this model, whose actions are vocabulary ids, found "actions")"},
    {R"({"id":"t","prompt_token_ids":[1,2,3,4,-3,-3],"action_token_ids":$R2,"num_frames":2})",
     R"(field "prompt_token_ids" index 4 (frame 0, action slot 0): expected an action token id in [0, 100) outside the image ids [0, 90), found -3 (the action placeholder; this model's context frames hold their action ids))"},
    {R"({"id":"t","prompt_token_ids":[1,2,3,4,90,91,5,6,7,8,90,7],"action_token_ids":$R2,"num_frames":2})",
     R"(field "prompt_token_ids" index 11 (frame 1, action slot 1): expected an action token id in [0, 100) outside the image ids [0, 90), found 7)"},
    {R"({"id":"t","prompt_token_ids":[1,2,3,90,90,91],"action_token_ids":$R2,"num_frames":2})",
     R"(field "prompt_token_ids" index 3 (frame 0, image slot 3): expected an image token id in [0, 90), found 90)"},
    {R"({"id":"t","prompt_token_ids":[1,2,3,4,90,100],"action_token_ids":$R2,"num_frames":2})",
     R"(field "prompt_token_ids" index 5 (frame 0, action slot 1): expected an action token id in [0, 100) outside the image ids [0, 90), found 100)"},
    {R"({"id":"t","prompt_token_ids":[1,2,3,4,90],"action_token_ids":$R2,"num_frames":2})",
     R"(field "prompt_token_ids": expected a positive multiple of 6 ids (frames of 4 image + 2 action slots), found 5)"},
    {R"({"id":"t","prompt_token_ids":$T1,"num_frames":3})",
     R"(missing field "action_token_ids": expected 3 or 2 rows of 2 action token ids (one row after each of the 3 generated frames; the last frame's row is optional), found no such field)"},
    {R"({"id":"t","prompt_token_ids":$T1,"action_token_ids":[[92,93]],"num_frames":3})",
     R"(field "action_token_ids": expected 3 or 2 rows of 2 action token ids (one row after each of the 3 generated frames; the last frame's row is optional), found 1 rows)"},
    {R"({"id":"t","prompt_token_ids":$T1,"action_token_ids":[92,93],"num_frames":2})",
     R"(field "action_token_ids" row 0: expected a list of 2 action token ids, found 92)"},
    {R"({"id":"t","prompt_token_ids":$T1,"action_token_ids":"92 93","num_frames":2})",
     R"(field "action_token_ids": expected 2 or 1 rows of 2 action token ids (one row after each of the 2 generated frames; the last frame's row is optional), found "92 93")"},
    {R"({"id":"t","prompt_token_ids":$T1,"action_token_ids":[[92,93],[94]],"num_frames":2})",
     R"(field "action_token_ids" row 1: expected 2 ids, found 1)"},
    {R"({"id":"t","prompt_token_ids":$T1,"action_token_ids":[[92,93],[94,12]],"num_frames":2})",
     R"(field "action_token_ids" row 1 column 1: expected an action token id in [0, 100) outside the image ids [0, 90), found 12)"},
    {R"({"id":"t","prompt_token_ids":$T1,"action_token_ids":[[92,93.0],[94,95]],"num_frames":2})",
     R"(field "action_token_ids" row 0 column 1: expected an action token id in [0, 100) outside the image ids [0, 90), found 93.0)"},
    {R"({"id":"t","prompt_token_ids":$T1,"action_token_ids":[[92,-1],[94,95]],"num_frames":2})",
     R"(field "action_token_ids" row 0 column 1: expected an action token id in [0, 100) outside the image ids [0, 90), found -1)"},
    {R"({"id":"t","prompt_token_ids":$T1,"action_token_ids":$R2,"num_frames":2,"overlap":3})",
     R"(field "overlap": expected an integer in [1, 2] (a round holds 3 frames), found 3)"},
    {R"({"id":"t","prompt_token_ids":[1,2,3,4,90,91,1,2,3,4,90,91,1,2,3,4,90,91,1,2,3,4,90,91],"action_token_ids":$R2,"num_frames":2})",
     R"(field "prompt_token_ids": expected at most 3 context frames (18 ids; a round holds 3 frames), found 4 frames (24 ids))"},
};

}  // namespace

TEST_SUITE("jobs") {
  TEST_CASE("action-token model: malformed job lines give their exact messages") {
    const ModelSpec spec = token_spec();
    for (const BadCase& c : kBadActionTokenJobs) {
      std::string line = expand_tokens(c.line);
      CAPTURE(line);
      CHECK(error_of(line, spec) == std::string("line 7: ") + c.message);
    }
    // Without an image-id range, any id of the vocab may be an action.
    ModelSpec whole = spec;
    whole.logit_end = 0;
    CHECK(error_of(expand_tokens(R"({"prompt_token_ids":$T1,"action_token_ids":[[5,100]],)"
                                 R"("num_frames":1})"),
                   whole) ==
          "line 7: field \"action_token_ids\" row 0 column 1: expected an action token id in "
          "[0, 100), found 100");
  }

  TEST_CASE("action-token model: a good job parses to the ids written; rows are optional last") {
    Job job;
    JobError error;
    const std::string line = R"({"id":"mine","prompt_token_ids":[1,2,3,4,90,91,5,6,7,8,92,93],)"
                             R"("action_token_ids":[[94,95],[96,97]],"num_frames":3,"overlap":1})";
    REQUIRE(parse_job_line(line, 2, token_spec(), JobDefaults{}, job, error));
    CHECK(job.context_frames == 2);
    CHECK(job.prompt == std::vector<int32_t>{1, 2, 3, 4, 90, 91, 5, 6, 7, 8, 92, 93});
    CHECK(job.action_id_rows == 2);  // the third frame's row left out
    CHECK(job.action_ids == std::vector<int32_t>{94, 95, 96, 97});
    CHECK(job.action_rows == 0);
    CHECK(job.actions.empty());
    CHECK(job.overlap == 1);
    // One generated frame needs no row at all.
    REQUIRE(parse_job_line(expand_tokens(R"({"prompt_token_ids":$T1,"num_frames":1})"), 3,
                           token_spec(), JobDefaults{}, job, error));
    CHECK(job.action_id_rows == 0);
    CHECK(job.action_ids.empty());
  }

  TEST_CASE("action_token_ids is an unknown field for a model that projects action rows") {
    // Unchanged message (the Python package mirrors it): the frame fields of that model.
    CHECK(error_of(expand(R"({"prompt_token_ids":$F1,"actions":$A2,"num_frames":1,)"
                          R"("action_token_ids":[[1,2,3]]})"),
                   loom::test::tiny_frame_spec()) ==
          "line 7: unknown field \"action_token_ids\": expected one of \"id\", "
          "\"prompt_token_ids\", \"actions\", \"num_frames\", \"overlap\", \"sampling\", "
          "\"num_samples\", found \"action_token_ids\"");
  }

  TEST_CASE("synthetic jobs of an action-token model parse back and keep ids in their ranges") {
    const ModelSpec spec = token_spec();
    const Job j = synthetic_frame_job(spec, "syn", 1, 17, 2, 4);
    CHECK(j.prompt.size() == 12);
    CHECK(j.action_id_rows == 4);
    for (size_t i = 0; i < j.prompt.size(); i++)
      CHECK((int(i % 6) < 4 ? j.prompt[i] < 90 : j.prompt[i] >= 90));
    for (int32_t a : j.action_ids) CHECK((a >= 90 && a < 100));
  }
}
