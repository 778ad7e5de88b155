// The loom binary end to end (issue 2 §11): run the tiny models from their sample jobs and
// check the results schema and token counts; a jobs file with bad lines yields exactly the
// expected error records while the good jobs finish; fatal errors are one line and exit 2.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/provenance.h"

using nlohmann::json;

namespace {

const std::string kLoom = std::string(LOOM_BIN_DIR) + "/loom";
const std::string kData = LOOM_TESTDATA;
// A folder of this process: test binaries of several checkouts may run at once.
const std::string kTmp = cli::temp_dir("cli") + "/";

struct Ran {
  int code = -1;
  std::string err;  // stderr
};

// `env`: variable assignments put before the command, e.g. "LOOM_OVERLAP=6 ".
Ran run(const std::string& args, const std::string& tag, const std::string& env = "") {
  const std::string err_path = kTmp + "loom_cli_" + tag + ".err";
  const int status = std::system((env + kLoom + " " + args + " 2>" + err_path).c_str());
  Ran r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

std::vector<json> read_lines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("run: every sample of every job, with the documented schema") {
  for (const std::string model : {"tiny_v1", "tiny_v2", "tiny_llama"}) {
    CAPTURE(model);
    const std::string out = kTmp + "loom_cli_" + model + ".jsonl", rep = out + ".report.json";
    std::remove(out.c_str());
    Ran r = run("run -q --model " + kData + "/" + model + " --jobs " + kData + "/jobs/" + model +
                    ".jsonl --overwrite --out " + out + " --report " + rep,
                model);
    CHECK(r.code == 0);
    CHECK(r.err == "");  // --quiet
    const json cfg = json::parse(std::ifstream(kData + "/" + model + "/config.json"));
    const int vocab = cfg["vocab_size"];
    std::map<std::string, json> jobs;
    for (const json& j : read_lines(kData + "/jobs/" + model + ".jsonl")) jobs[j["id"]] = j;
    std::set<std::pair<std::string, int>> seen;
    for (const json& res : read_lines(out)) {
      CHECK(res["status"] == "ok");
      const json& job = jobs.at(res["id"].get<std::string>());
      seen.insert({res["id"].get<std::string>(), res["sample"].get<int>()});
      const json& tm = res["timing"];
      CHECK(tm["prefill_s"].get<double>() >= 0);
      CHECK(tm["decode_s"].get<double>() >= 0);  // was negative for plain Llama (end = admission)
      CHECK(std::abs(tm["total_s"].get<double>() - tm["prefill_s"].get<double>() -
                     tm["decode_s"].get<double>()) < 1e-9);
      if (job.contains("num_frames")) {
        REQUIRE(res["frames"].size() == job["num_frames"].get<size_t>());
        CHECK(res["timing"]["frame_s"].size() == res["frames"].size());
        for (const json& f : res["frames"]) {
          REQUIRE(f.size() == cfg["num_image_patches"].get<size_t>());
          for (const json& t : f) CHECK((t.get<int>() >= 0 && t.get<int>() < vocab));
        }
      } else {
        const size_t n = res["tokens"].size();
        if (res["finish_reason"] == "length")
          CHECK(n == job["max_tokens"].get<size_t>());
        else
          CHECK((res["finish_reason"] == "eos" && n <= job["max_tokens"].get<size_t>()));
      }
    }
    size_t expected = 0;
    for (const auto& [id, job] : jobs) expected += job.value("num_samples", 1);
    CHECK(seen.size() == expected);
    const json report = json::parse(std::ifstream(rep));
    CHECK(report["jobs_summary"]["failed"] == 0);
    CHECK(report["generated"]["tokens"].get<int64_t>() > 0);
    CHECK(report["kv_cache"]["peak_blocks"].get<int>() > 0);
    // No --block-size: the backend's own (Backend::default_block_size).
    CHECK(report["kv_cache"]["block_size"] == (report["backend"] == "cuda" ? 64 : 16));
    CHECK(report["provenance"]["options"]["block_size"] == 0);  // the backend chose
  }
}

TEST_CASE("run --batch-invariant on the cpu: accepted, the same tokens, the report says so") {
  // The cpu backend is batch-invariant with or without the flag.
  std::map<bool, std::vector<json>> results;
  for (bool flag : {false, true}) {
    CAPTURE(flag);
    const std::string out = std::string(kTmp + "loom_cli_inv") + (flag ? "1" : "0") + ".jsonl";
    const std::string rep = out + ".report.json";
    std::remove(out.c_str());
    Ran r = run("run -q --backend cpu --model " + kData + "/tiny_v1 --jobs " + kData +
                    "/jobs/tiny_v1.jsonl --overwrite --out " + out + " --report " + rep +
                    (flag ? " --batch-invariant" : ""),
                "inv");
    CHECK(r.code == 0);
    CHECK(r.err == "");
    CHECK(json::parse(std::ifstream(rep))["batch_invariant"] == true);
    for (json& res : read_lines(out)) {
      res.erase("timing");
      results[flag].push_back(res);
    }
  }
  CHECK(!results[false].empty());
  CHECK(results[false] == results[true]);
}

TEST_CASE("run with a KV pool too small for every job at once: preemptions, the same records") {
  // 25 (tiny_llama: 20) blocks of 4 slots: the jobs are admitted on their prompts, preempted and
  // recomputed as they grow; the records (timing aside) equal a run with the default pool.
  for (const std::string model : {"tiny_v1", "tiny_llama"}) {
    CAPTURE(model);
    std::map<bool, std::vector<json>> results;
    json report;
    for (bool tight : {false, true}) {
      const std::string out = kTmp + "loom_cli_pre" + std::to_string(tight) + ".jsonl";
      const std::string rep = out + ".report.json";
      std::remove(out.c_str());
      Ran r = run(
          "run -q --backend cpu --block-size 4 --model " + kData + "/" + model + " --jobs " +
              kData + "/jobs/" + model + ".jsonl --overwrite --out " + out + " --report " + rep +
              (tight ? " --kv-blocks " + std::string(model == "tiny_v1" ? "25" : "20") : ""),
          "pre");
      CHECK(r.code == 0);
      if (tight) report = json::parse(std::ifstream(rep));
      for (json& res : read_lines(out)) {
        res.erase("timing");
        results[tight].push_back(res);
      }
    }
    CHECK(report["kv_cache"]["preemptions"].get<int>() > 0);
    CHECK(report["kv_cache"]["recomputed_slots"].get<int>() > 0);
    auto by_key = [](std::vector<json> v) {
      std::sort(v.begin(), v.end(), [](const json& a, const json& b) {
        return std::make_pair(a["id"].get<std::string>(), a["sample"].get<int>()) <
               std::make_pair(b["id"].get<std::string>(), b["sample"].get<int>());
      });
      return v;
    };
    CHECK(!results[false].empty());
    CHECK(by_key(results[false]) == by_key(results[true]));
  }
}

TEST_CASE("run: bad job lines give exactly the expected error records; good jobs finish") {
  const std::string out = kTmp + "loom_cli_bad.jsonl";
  std::remove(out.c_str());
  Ran r = run("run -q --model " + kData + "/tiny_v1 --jobs " + kData +
                  "/jobs/bad_tiny_v1.jsonl --overwrite --out " + out,
              "bad");
  CHECK(r.code == 1);  // some jobs failed
  std::map<int, json> errors;
  std::set<int> ok_lines;
  for (const json& res : read_lines(out)) {
    if (res["status"] == "error") {
      CHECK(errors.count(res["line"].get<int>()) == 0);
      errors[res["line"].get<int>()] = res;
    } else {
      CHECK(res["status"] == "ok");
      ok_lines.insert(res["line"].get<int>());
    }
  }
  const std::vector<json> expected = read_lines(kData + "/jobs/bad_tiny_v1.expected.jsonl");
  CHECK(errors.size() == expected.size());
  for (const json& e : expected) {
    const int line = e["line"];
    CAPTURE(line);
    REQUIRE(errors.count(line) == 1);
    CHECK(errors[line]["id"] == e["id"]);
    const std::string msg = errors[line]["error"];
    CHECK(msg.rfind("line " + std::to_string(line) + ": ", 0) == 0);
    CHECK(msg.find(e["error_contains"].get<std::string>()) != std::string::npos);
  }
  // Every non-blank line of the file is either an error record or a finished job.
  int lines = 0;
  std::ifstream in(kData + "/jobs/bad_tiny_v1.jsonl");
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines++;
  CHECK(int(ok_lines.size() + errors.size()) == lines);
  CHECK(ok_lines.size() >= 3);
}

TEST_CASE("run: stdin to stdout gives the same tokens as files") {
  const std::string a = kTmp + "loom_cli_files.jsonl", b = kTmp + "loom_cli_pipe.jsonl";
  const std::string jobs = kData + "/jobs/tiny_v2.jsonl";
  CHECK(run("run -q --model " + kData + "/tiny_v2 --jobs " + jobs + " --overwrite --out " + a,
            "files")
            .code == 0);
  CHECK(run("run -q --model " + kData + "/tiny_v2 --jobs - --out - < " + jobs + " > " + b, "pipe")
            .code == 0);
  auto frames = [](const std::string& p) {
    std::map<std::pair<std::string, int>, json> m;
    for (const json& r : read_lines(p))
      m[{r["id"].get<std::string>(), r["sample"].get<int>()}] = r["frames"];
    return m;
  };
  CHECK(frames(a) == frames(b));
  CHECK(frames(a).size() >= 3);
}

// Jobs from a pipe run as they arrive: loom reads `jobs` (6 lines of 1, 2, 1, 2 … samples)
// from a pipe whose writer pauses after the first `first` lines; the records of those lines'
// jobs must come while it pauses, `while_open` of them, and `total` once it is done.
static void check_pipe_arrivals(const std::string& name, const std::string& options,
                                const std::string& results, int first, long while_open,
                                long total) {
  const std::string dir = cli::temp_dir(name);
  std::ifstream in(cli::make_tiny_v1_jobs(dir + "/jobs.jsonl", 6, 2));
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l + "\n");
  FILE* p = popen((kLoom + " run -q --backend cpu --model " + kData + "/tiny_v1 --jobs - --out " +
                   dir + "/r.jsonl " + options + " 2> " + dir + "/err.txt")
                      .c_str(),
                  "w");
  REQUIRE(p != nullptr);
  for (int i = 0; i < first; ++i) std::fputs(lines[size_t(i)].c_str(), p);
  std::fflush(p);
  auto records = [&] {
    std::ifstream r(dir + "/" + results);
    return long(
        std::count(std::istreambuf_iterator<char>(r), std::istreambuf_iterator<char>(), '\n'));
  };
  const auto t0 = std::chrono::steady_clock::now();
  while (records() < while_open && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(records() == while_open);
  for (size_t i = size_t(first); i < lines.size(); ++i) std::fputs(lines[i].c_str(), p);
  const int status = pclose(p);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(records() == total);
}

// The engine read ahead and waited for a 4th line before starting any job.
TEST_CASE("run: jobs from a pipe run as they arrive, not once the writer is done") {
  check_pipe_arrivals("cli_pipe_arrive", "", "r.jsonl", 3, 4, 9);  // jobs 0-2: 1 + 2 + 1 samples
}

// Shard 0 of 2 owns lines 0, 2, 4. After the writer's 4th line (shard 1's) the reader waited
// inside the read for line 5 of the pipe, so jobs 0 and 2 did not run while the writer paused.
TEST_CASE("run: a shard of a pipe runs its jobs while the writer pauses after another's line") {
  // jobs 0, 2, 4: 1 sample each
  check_pipe_arrivals("cli_pipe_shard", "--shard 0/2", "r.shard-0-of-2.jsonl", 4, 2, 3);
}

TEST_CASE("fatal errors: one readable line and exit code 2") {
  Ran missing = run("run --model /nonexistent/model --jobs " + kData +
                        "/jobs/tiny_v1.jsonl --out " + kTmp + "x.jsonl",
                    "missing");
  CHECK(missing.code == 2);
  CHECK(missing.err.rfind("loom: error: ", 0) == 0);
  CHECK(missing.err.find("/nonexistent/model") != std::string::npos);
  CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);

  // A jobs file that cannot be read is said before the model loads, and leaves nothing.
  for (const std::string& jobs : {kTmp + "no-such-jobs.jsonl", kTmp}) {
    Ran no_jobs = run(
        "run --model " + kData + "/tiny_v1 --jobs " + jobs + " --out " + kTmp + "nojobs/r.jsonl",
        "nojobs");
    CHECK(no_jobs.code == 2);
    CHECK(no_jobs.err == "loom: error: cannot read jobs from " + jobs +
                             (jobs == kTmp ? ": it is a folder" : ": no such file") +
                             "; expected a JSONL jobs file, or - for stdin\n");
    CHECK(!std::filesystem::exists(kTmp + "nojobs"));
  }

  Ran unwritable = run("run --model " + kData + "/tiny_v1 --jobs " + kData +
                           "/jobs/tiny_v1.jsonl --out /proc/loom_dir/out.jsonl",
                       "unwritable");
  CHECK(unwritable.code == 2);
  CHECK(unwritable.err.find("/proc/loom_dir/out.jsonl") != std::string::npos);

  Ran bf16_cpu = run("run --backend cpu --dtype bf16 --model " + kData + "/tiny_v1 --jobs " +
                         kData + "/jobs/tiny_v1.jsonl --out " + kTmp + "x.jsonl",
                     "bf16cpu");
  CHECK(bf16_cpu.code == 2);
  CHECK(bf16_cpu.err.find("--dtype bf16 needs the cuda backend") != std::string::npos);

  // tiny_v1's temporal table has 6 rows: a new round carries at most 5 frames. A larger
  // --overlap (typed or from LOOM_OVERLAP) stops the run instead of being lowered to 5.
  // (One line; after the run's start a line not on a terminal ends with its time stamp.)
  const std::string too_much =
      "loom: error: --overlap 6: expected an integer in [1, 5] for this model (its temporal "
      "table has 6 rows), found 6";
  // Said before any output is made, as every refusal that needs the model's spec but no
  // weights (--kv-dtype bf16 on the cpu, --kv-scales without fp8).
  const std::string outs = "/jobs/tiny_v1.jsonl --out " + kTmp + "refused/a/r.jsonl --report " +
                           kTmp + "refused/rep.json --tokens-out " + kTmp + "refused/ds";
  Ran overlap = run("run -q --model " + kData + "/tiny_v1 --jobs " + kData + outs + " --overlap 6",
                    "overlap");
  CHECK(overlap.code == 2);
  CHECK(overlap.err == too_much + "\n");
  CHECK(!std::filesystem::exists(kTmp + "refused"));
  for (const std::string& opt :
       {std::string("--backend cpu --kv-dtype bf16"), "--kv-scales " + kTmp + "s.json"}) {
    CAPTURE(opt);
    Ran r = run("run -q --model " + kData + "/tiny_v1 --jobs " + kData + outs + " " + opt, "kv");
    CHECK(r.code == 2);
    CHECK(r.err.find("loom: error: --kv-") == 0);
    CHECK(!std::filesystem::exists(kTmp + "refused"));
  }
  // A refusal after the model loaded (a KV pool no host can allocate): the same, nothing left,
  // not even the side file of a run that never wrote a record.
  Ran pool = run("run -q --backend cpu --kv-blocks 2147483647 --model " + kData +
                     "/tiny_v1 --jobs " + kData + outs,
                 "pool");
  CHECK(pool.code == 2);
  CHECK(pool.err.find("out of host memory") != std::string::npos);
  CHECK(!std::filesystem::exists(kTmp + "refused"));
  // --max-seqs up to 2^31 - 1 runs (twice it once overflowed the jobs read ahead).
  Ran wide =
      run("run -q --backend cpu --max-seqs 2147483647 --model " + kData + "/tiny_v1 --jobs " +
              kData + "/jobs/tiny_v1.jsonl --out " + kTmp + "wide.jsonl",
          "wide");
  CHECK(wide.code == 0);
  CHECK(read_lines(kTmp + "wide.jsonl").size() == 5);
  Ran overlap_env = run("run -q --overwrite --model " + kData + "/tiny_v1 --jobs " + kData +
                            "/jobs/tiny_v1.jsonl --out " + kTmp + "overlap.jsonl",
                        "overlap_env", "LOOM_OVERLAP=6 ");
  CHECK(overlap_env.code == 2);
  CHECK(overlap_env.err.rfind(
            "loom: error: --overlap 6 (from LOOM_OVERLAP): expected an integer in [1, 5]", 0) == 0);
}

TEST_CASE("inspect: spec, roles and totals of a checkpoint") {
  const std::string out = kTmp + "loom_cli_inspect.txt";
  const int status = std::system((kLoom + " inspect " + kData + "/tiny_v1 > " + out).c_str());
  CHECK(WEXITSTATUS(status) == 0);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text.find("LlamaActionForCausalLM") != std::string::npos);
  CHECK(text.find("model.layers.{i}.self_attn.k_proj.weight") != std::string::npos);
  CHECK(text.find("pos_embedding_spatio_temporal.temporal_embeddings.weight") != std::string::npos);
  CHECK(text.find("406,848") != std::string::npos);  // parameters of the tiny v1 model
}

TEST_CASE("progress: plain lines on a non-terminal stderr, none with --quiet") {
  const std::string args = "run --progress-interval 0.1 --model " + kData + "/tiny_v1 --jobs " +
                           kData + "/jobs/tiny_v1.jsonl --overwrite --out " + kTmp +
                           "loom_cli_progress.jsonl";
  Ran r = run(args, "progress");
  CHECK(r.code == 0);
  CHECK(r.err.find("\r") == std::string::npos);  // no live-line rewriting into a log
  CHECK(r.err.find("loom: done: 4/4 jobs read, 5/5 samples, 28/28 frames (100.0%), 0 failed") !=
        std::string::npos);
  CHECK(r.err.find("results in " + kTmp + "loom_cli_progress.jsonl") != std::string::npos);
  Ran q = run(args + " --quiet", "progress_quiet");
  CHECK(q.code == 0);
  CHECK(q.err.empty());
}

#include <unistd.h>

#include <filesystem>

TEST_CASE("run: integer ids come back as integers; a duplicate id is one error record") {
  namespace fs = std::filesystem;
  const std::string tag = "ids_" + std::to_string(::getpid());
  const fs::path dir = fs::temp_directory_path() / ("loom_cli_" + tag);
  fs::create_directories(dir);
  const std::string jobs = (dir / "jobs.jsonl").string(), out = (dir / "out.jsonl").string();
  auto job = [](const std::string& id_field, int samples) {
    return "{" + id_field + "\"prompt_token_ids\": [671, 805, 25], \"max_tokens\": 3, " +
           "\"ignore_eos\": true, \"num_samples\": " + std::to_string(samples) + "}\n";
  };
  {
    std::ofstream f(jobs);
    f << job("\"id\": 8, ", 2)                      // line 1
      << job("\"id\": \"dup\", ", 1)                // line 2
      << job("\"id\": \"8\", ", 1)                  // line 3: the id 8 again
      << job("\"id\": \"dup\", ", 1)                // line 4
      << job("", 1)                                 // line 5: "line-5"
      << job("\"id\": \"line-5\", ", 1)             // line 6
      << job("\"id\": 18446744073709551615, ", 1);  // line 7
  }
  Ran r = run("run -q --model " + kData + "/tiny_llama --jobs " + jobs + " --out " + out, tag);
  CHECK(r.code == 1);  // some jobs wrote error records
  std::map<int, std::vector<json>> by_line;
  for (const json& res : read_lines(out)) by_line[res["line"].get<int>()].push_back(res);
  REQUIRE(by_line.size() == 7);
  REQUIRE(by_line[1].size() == 2);
  for (const json& res : by_line[1]) {
    CHECK(res["id"].is_number_integer());
    CHECK(res["id"] == 8);
    CHECK(res["status"] == "ok");
  }
  CHECK(by_line[2].at(0)["id"] == "dup");
  CHECK(by_line[5].at(0)["id"] == "line-5");
  CHECK(by_line[5].at(0)["status"] == "ok");
  CHECK(by_line[7].at(0)["id"].is_number_unsigned());
  CHECK(by_line[7].at(0)["id"].get<uint64_t>() == 18446744073709551615ull);
  const std::map<int, std::string> errors = {
      {3,
       "line 3: field \"id\": \"8\" is already the id of line 1; expected ids unique within a "
       "run (ids are compared as text: 8 and \"8\" are the same id)"},
      {4,
       "line 4: field \"id\": \"dup\" is already the id of line 2; expected ids unique within "
       "a run"},
      {6,
       "line 6: field \"id\": \"line-5\" is already the id of line 5; expected ids unique "
       "within a run"}};
  for (const auto& [line, message] : errors) {
    CAPTURE(line);
    REQUIRE(by_line[line].size() == 1);
    CHECK(by_line[line][0]["status"] == "error");
    CHECK(by_line[line][0]["error"] == message);
    CHECK(by_line[line][0]["id"].is_string());  // "8" was a string on line 3
  }
  fs::remove_all(dir);
  std::remove((kTmp + "loom_cli_" + tag + ".err").c_str());
}

TEST_CASE("run: a plain model stops at any id of an eos_token_id list") {
  // The tiny model's first greedy tokens, then the same job with one of them as a second eos.
  const std::string job =
      R"({"id": "e", "prompt_token_ids": [671, 805, 25, 808, 470], "max_tokens": 16, )"
      R"("sampling": {"temperature": 0.0}})";
  std::ofstream(kTmp + "eos_jobs.jsonl") << job << "\n";
  Ran base = run("run -q --backend cpu --overwrite --model " + kData + "/tiny_llama --jobs " +
                     kTmp + "eos_jobs.jsonl --out " + kTmp + "eos_base.jsonl",
                 "eos_base");
  REQUIRE(base.code == 0);
  const std::vector<int> t = read_lines(kTmp + "eos_base.jsonl")[0]["tokens"];
  size_t k = 1;  // the first token not seen before it
  while (k < t.size() && std::find(t.begin(), t.begin() + long(k), t[k]) != t.begin() + long(k))
    ++k;
  REQUIRE(k < t.size());
  const std::string model = kTmp + "eos_model";
  std::filesystem::remove_all(model);
  std::filesystem::copy(kData + "/tiny_llama", model);
  json config = json::parse(std::ifstream(model + "/config.json"));
  config["eos_token_id"] = {config["eos_token_id"], t[k]};
  std::ofstream(model + "/config.json") << config.dump();
  Ran list = run("run -q --backend cpu --overwrite --model " + model + " --jobs " + kTmp +
                     "eos_jobs.jsonl --out " + kTmp + "eos_list.jsonl",
                 "eos_list");
  REQUIRE(list.code == 0);
  const json r = read_lines(kTmp + "eos_list.jsonl")[0];
  CHECK(r["finish_reason"] == "eos");
  CHECK(r["tokens"] == json(std::vector<int>(t.begin(), t.begin() + long(k) + 1)));
}

// A CUDA build whose module is not beside it (only bin/loom copied to a GPU node) ran
// --backend auto on the CPU without a word; with an NVIDIA GPU in view it says why it cannot
// use it. The GPU is a /dev/nvidia0 file in a private mount namespace's /dev.
TEST_CASE("--backend auto with a GPU in view and no CUDA module is an error") {
  if (!loom::build_info().cuda) {
    MESSAGE("SKIPPED: a build without CUDA (it says so in its banner and runs on the CPU)");
    return;
  }
  const std::string dir = cli::temp_dir("cli_no_module");
  for (const char* f : {"loom", "libsimdjson.so.14"})
    std::filesystem::copy_file(std::string(LOOM_BIN_DIR) + "/" + f, dir + "/" + f);
  const std::string script = dir + "/gpu.sh";
  std::ofstream(script) << "mount -t tmpfs tmpfs /dev || exit 77\ntouch /dev/nvidia0\n"
                        << dir << "/loom run --backend auto --model " << kData
                        << "/tiny_v1 --model-table " << LOOM_BIN_DIR
                        << "/models/llama_action.json --jobs " << kData
                        << "/jobs/tiny_v1.jsonl --out " << dir << "/r.jsonl 2> " << dir
                        << "/err.txt\necho $? > " << dir << "/rc.txt\n";
  const int status = std::system(("unshare -m sh " + script + " 2>/dev/null").c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    MESSAGE("SKIPPED: no private mount namespace here (needs root)");
    return;
  }
  CHECK(cli::slurp(dir + "/rc.txt") == "2\n");
  const std::string err = cli::slurp(dir + "/err.txt");
  CHECK(err.find("loom: error: --backend auto: this machine has an NVIDIA GPU (/dev/nvidia0) "
                 "but loom cannot use it (") != std::string::npos);
  CHECK(err.find("libloom-cuda.so") != std::string::npos);  // where the module was looked for
  CHECK(!std::filesystem::exists(dir + "/r.jsonl"));
}

// loom copied alone (no models/ beside it, no share/ above): the tables it looked for, not an
// "unknown architecture" with an empty list of known ones.
TEST_CASE("a loom without its tables says where it looked for them") {
  const std::string dir = cli::temp_dir("cli_no_tables");
  for (const char* f : {"loom", "libsimdjson.so.14"})
    std::filesystem::copy_file(std::string(LOOM_BIN_DIR) + "/" + f, dir + "/" + f);
  const int status = std::system(
      (dir + "/loom inspect --model " + kData + "/tiny_v1 > /dev/null 2> " + dir + "/err.txt")
          .c_str());
  CHECK(WEXITSTATUS(status) == 2);
  const std::string parent = std::filesystem::path(dir).parent_path().string();
  CHECK(cli::slurp(dir + "/err.txt") ==
        "loom: error: no mapping tables found for " + kData + "/tiny_v1/config.json (looked for " +
            dir + "/models and " + parent +
            "/share/loom/models; loom finds its tables beside "
            "itself): install loom whole, set LOOM_MODELS_DIR, or pass --model-table\n");
}
