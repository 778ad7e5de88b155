// `loom run`'s stderr (issue 14 §2): in a log file (not a terminal) a banner and a timestamp on
// every line, the first progress line within 5 s and then every --progress-interval, totals
// from the pre-count of the jobs file; --log-format json; the error summary of a failed run;
// step kinds that add up; the latency distributions of the report.
#include <doctest/doctest.h>

#include <chrono>
#include <regex>
#include <thread>

#include "cli_util.h"
#include "core/version.h"
#include "engine/report.h"

using namespace cli;

namespace {

const std::string kModel = " --model " + kData + "/tiny_v1";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// "+0:00:02.1" → 2.1
double elapsed_of(const std::string& stamp) {
  int h = 0, m = 0;
  double s = 0;
  REQUIRE(std::sscanf(stamp.c_str(), "+%d:%d:%lf", &h, &m, &s) == 3);
  return h * 3600.0 + m * 60.0 + s;
}

// Total samples and frames (num_frames × num_samples) of a jobs file.
std::pair<int64_t, int64_t> totals_of(const std::string& jobs) {
  int64_t samples = 0, frames = 0;
  for (const json& j : read_lines(jobs)) {
    const int64_t n = j.value("num_samples", 1);
    samples += n;
    frames += n * j.value("num_frames", 0);
  }
  return {samples, frames};
}

}  // namespace

TEST_CASE(
    "a log file: banner, every line stamped, first progress line within 5 s, then each interval") {
  const std::string dir = temp_dir("logs_stamp");
  // Long enough to be stopped while it runs: thousands of samples, one sequence at a time.
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 3000, 8);
  const std::string err = dir + "/err.txt", out = dir + "/out.jsonl";
  const auto t0 = std::chrono::steady_clock::now();
  Spawned s = spawn(
      "run --max-seqs 1 --progress-interval 1" + kModel + " --jobs " + jobs + " --out " + out, err);
  auto since = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto progress_lines = [&] {
    int n = 0;
    for (const std::string& l : lines_of(slurp(err))) n += l.find(" loom: progress: ") != l.npos;
    return n;
  };
  double first = -1;
  while (since() < 20 && progress_lines() < 2) {
    if (first < 0 && progress_lines() >= 1) first = since();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(s.pid, SIGINT);
  const Exit e = wait_for(s);
  INFO(e.err);
  CHECK(e.code == 130);
  CHECK(first > 0);
  CHECK(first < 5.0);  // read while it runs: from the start of the process

  const std::regex stamped(
      R"(^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (\+\d+:\d\d:\d\d\.\d) loom: (.*)$)");
  const std::regex stamped_at_end(
      R"(^loom: (warning|error): .* \[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \+\d+:\d\d:\d\d\.\d\]$)");
  std::vector<double> progress_at;
  std::string banner, done;
  for (const std::string& l : lines_of(e.err)) {
    CAPTURE(l);
    std::smatch m;
    if (std::regex_match(l, stamped_at_end)) continue;
    REQUIRE(std::regex_match(l, m, stamped));
    std::chrono::system_clock::time_point t;
    CHECK(loom::parse_utc(m[1], t));
    const std::string msg = m[3];
    if (msg.rfind("progress: ", 0) == 0) progress_at.push_back(elapsed_of(m[2]));
    if (msg.rfind("done: ", 0) == 0) done = msg;
    if (progress_at.empty() && done.empty()) banner += msg + "\n";
  }
  CHECK(banner.find("version " + std::string(loom::kLoomVersion)) != std::string::npos);
  CHECK(banner.find("model " + kData + "/tiny_v1: LlamaActionForCausalLM (fnv1a64:") !=
        std::string::npos);
  CHECK(banner.find("backend cpu on cpu, dtype f32 (weights f32, KV f32)") != std::string::npos);
  CHECK(std::regex_search(banner, std::regex(R"(KV pool \d+\.\d\d GiB: \d+ blocks of 16 slots)")));
  CHECK(banner.find("jobs " + jobs + ", shard 0/1 (no --shard); results " + out) !=
        std::string::npos);
  REQUIRE(progress_at.size() >= 2);
  CHECK(progress_at[0] <= 5.0);
  CHECK(progress_at[1] - progress_at[0] == doctest::Approx(1.0).epsilon(0.5));  // the interval
  // Totals from the pre-count: 3000 jobs, 1 or 2 samples each, 8 frames a sample.
  CHECK(std::regex_search(done, std::regex(R"(^done: \d+/3000 jobs read, \d+/4500 samples, )"
                                           R"(\d+/36000 frames \(\d+\.\d%\), 0 failed)")));
  // The summary's tokens include the in-flight samples' ones; the stop line says how many, so
  // the rest are exactly the written frames' (10 image tokens a frame).
  std::smatch totals, unwritten;
  REQUIRE(std::regex_search(e.err, totals, std::regex(R"((\d+) frames, (\d+) tokens in)")));
  REQUIRE(std::regex_search(
      e.err, unwritten,
      std::regex(R"((\d+) samples read were not written \((\d+) running, with (\d+) of the )"
                 R"(tokens above; (\d+) waiting to start\); --resume runs them)")));
  CHECK(std::stoll(totals[2]) - std::stoll(unwritten[3]) == 10 * std::stoll(totals[1]));
  // Running ones are what a step holds (--max-seqs), the rest waited in the read-ahead.
  CHECK(std::stoll(unwritten[1]) == std::stoll(unwritten[2]) + std::stoll(unwritten[4]));
  CHECK(std::stoll(unwritten[2]) <= 1);  // --max-seqs 1
  fs::remove_all(dir);
}

TEST_CASE("--log-format json: every line a JSON object; progress lines carry their numbers") {
  const std::string dir = temp_dir("logs_json");
  const std::string jobs = kData + "/jobs/tiny_v1.jsonl";
  // LOOM_FILE_SECONDS without --tokens-out: a warning said as the options are checked, before
  // the banner, and a JSON line as well.
  const Exit e = run("run --log-format json --progress-interval 0.1" + kModel + " --jobs " + jobs +
                         " --out " + dir + "/out.jsonl",
                     dir, {"LOOM_FILE_SECONDS=3"});
  INFO(e.err);
  CHECK(e.code == 0);
  CHECK(e.err.find("{\"time\":") == 0);
  CHECK(e.err.find("LOOM_FILE_SECONDS is ignored") != std::string::npos);
  // A refused run's one error line too.
  const Exit refused = run(
      "run --log-format json" + kModel + " --jobs " + dir + "/none.jsonl --out " + dir + "/x.jsonl",
      dir);
  CHECK(refused.code == 2);
  const json error = json::parse(refused.err, nullptr, false);
  REQUIRE(error.is_object());
  CHECK(error["level"] == "error");
  CHECK(error["message"].get<std::string>().find("cannot read jobs from") == 0);
  // A refusal after the banner (a KV pool the host cannot hold) too, in words, not bad_alloc.
  const Exit pool = run("run --log-format json --kv-blocks 2147483647" + kModel + " --jobs " +
                            jobs + " --out " + dir + "/pool.jsonl",
                        dir);
  CHECK(pool.code == 2);
  const std::vector<std::string> lines = lines_of(pool.err);
  REQUIRE(!lines.empty());
  for (const std::string& l : lines) CHECK_MESSAGE(json::parse(l, nullptr, false).is_object(), l);
  const json refusal = json::parse(lines.back(), nullptr, false);
  CHECK(refusal.value("message", "").find("out of host memory") == 0);
  const auto [samples, frames] = totals_of(jobs);
  int progress = 0, info = 0;
  json last;
  for (const std::string& l : lines_of(e.err)) {
    CAPTURE(l);
    const json j = json::parse(l, nullptr, false);
    REQUIRE(j.is_object());
    std::chrono::system_clock::time_point t;
    CHECK(loom::parse_utc(j.at("time").get<std::string>(), t));
    CHECK(j.at("elapsed_s").get<double>() >= 0);
    const std::string level = j.at("level");
    CHECK((level == "info" || level == "progress" || level == "warning"));
    CHECK(j.at("message").is_string());
    info += level == "info";
    if (level != "progress") continue;
    ++progress;
    CHECK(j.at("samples_total") == samples);
    CHECK(j.at("frames_total") == frames);
    CHECK(j.at("jobs_total") == 4);
    last = j;
  }
  CHECK(info >= 5);  // banner, summary
  REQUIRE(progress >= 1);
  CHECK(last["samples_done"] == samples);  // the last line: all done
  CHECK(last["frames_done"] == frames);
  CHECK(last["totals_final"] == true);
  fs::remove_all(dir);
}

TEST_CASE("a failed run names its errors: the first kinds with their counts, even with -q") {
  const std::string dir = temp_dir("logs_errors");
  {
    const Exit e = run("run -q" + kModel + " --jobs " + kData + "/jobs/bad_tiny_v1.jsonl --out " +
                           dir + "/bad.jsonl",
                       dir);
    CHECK(e.code == 1);
    const std::vector<std::string> l = lines_of(e.err);
    const std::vector<json> expected = read_lines(kData + "/jobs/bad_tiny_v1.expected.jsonl");
    REQUIRE(expected.size() == 16);
    REQUIRE(l.size() == 7);
    CHECK(l[0].rfind("loom: warning: 16 of 20 jobs failed (16 kinds of error); the first 5: [",
                     0) == 0);
    for (size_t i = 0; i < 5; i++) {
      CAPTURE(l[i + 1]);
      const std::string head =
          "loom: warning:   1 job:  line " + std::to_string(expected[i]["line"].get<int>()) + ": ";
      CHECK(l[i + 1].rfind(head, 0) == 0);
      CHECK(l[i + 1].find(expected[i]["error_contains"].get<std::string>()) != std::string::npos);
    }
    CHECK(l[6].rfind("loom: warning:   ... 11 more kinds (11 jobs); every error is in its job's "
                     "record [",
                     0) == 0);
  }
  {
    // Kinds group the same mistake on different lines and values.
    const std::string jobs = dir + "/jobs.jsonl";
    std::ifstream in(kData + "/jobs/tiny_v1.jsonl");
    std::string good;
    std::getline(in, good);
    std::ofstream f(jobs);
    const json base = json::parse(good);
    for (int i = 0; i < 6; i++) {
      json j = base;
      j["id"] = "j" + std::to_string(i);
      // 3 jobs out of range, each another value, signed or not (a sign made another kind)
      if (i % 2 == 0) j["num_frames"] = i == 4 ? 0 : -i - 1;
      if (i == 3) j["colour"] = "red";  // 1 job: an unknown field
      f << j.dump() << "\n";
    }
    f.close();
    const Exit e =
        run("run -q" + kModel + " --jobs " + jobs + " --out " + dir + "/kinds.jsonl", dir);
    CHECK(e.code == 1);
    const std::vector<std::string> l = lines_of(e.err);
    REQUIRE(l.size() == 3);
    CHECK(l[0].rfind("loom: warning: 4 of 6 jobs failed (2 kinds of error): [", 0) == 0);
    CHECK(l[1].rfind("loom: warning:   3 jobs: line 1: field \"num_frames\": expected an integer "
                     "in [1, 100000], found -1 [",
                     0) == 0);
    CHECK(l[2].rfind("loom: warning:   1 job:  line 4: unknown field \"colour\"", 0) == 0);
  }
  fs::remove_all(dir);
}

TEST_CASE("report: prefill-only, decode-only and mixed steps add up; latency distributions") {
  const std::string dir = temp_dir("logs_steps");
  // 12 jobs of 2 or 5 frames, 4 sequences at a time: sequences finish at different steps, so
  // new prompts are prefilled beside running decodes.
  const std::vector<json> short_jobs = read_lines(make_tiny_v1_jobs(dir + "/a.jsonl", 6, 2));
  const std::vector<json> long_jobs = read_lines(make_tiny_v1_jobs(dir + "/b.jsonl", 6, 5));
  const std::string jobs = dir + "/jobs.jsonl";
  {
    std::ofstream f(jobs);
    for (size_t i = 0; i < 6; i++) {
      json a = short_jobs[i], b = long_jobs[i];
      a["id"] = "short-" + std::to_string(i);
      b["id"] = "long-" + std::to_string(i);
      f << a.dump() << "\n" << b.dump() << "\n";
    }
  }
  const Exit e = run("run -q --max-seqs 4" + kModel + " --jobs " + jobs + " --out " + dir +
                         "/out.jsonl --report " + dir + "/report.json",
                     dir);
  CHECK(e.code == 0);
  const json r = json::parse(std::ifstream(dir + "/report.json"));
  const json& b = r["batch"];
  CHECK(b["prefill_steps"].get<int64_t>() > 0);
  CHECK(b["decode_steps"].get<int64_t>() > 0);
  CHECK(b["mixed_steps"].get<int64_t>() > 0);
  CHECK(b["prefill_steps"].get<int64_t>() + b["decode_steps"].get<int64_t>() +
            b["mixed_steps"].get<int64_t>() ==
        b["steps"].get<int64_t>());
  const json& t = r["time_s"];
  CHECK(t["prefill"].get<double>() + t["decode"].get<double>() + t["mixed"].get<double>() <=
        t["run"].get<double>());
  // The KV pool's setup (a 2 GiB default pool zeroed on the cpu) is timed apart from the run.
  CHECK(t["kv_pool"].get<double>() > 0);
  // One definition of tokens/s: generated tokens over the run's wall time.
  CHECK(r["generated"]["tokens_per_s"].get<double>() ==
        doctest::Approx(r["generated"]["tokens"].get<double>() / t["run"].get<double>()));
  const int64_t samples = r["jobs_summary"]["samples_done"];
  CHECK(samples == totals_of(jobs).first);
  for (const char* d : {"ttft_s", "tpot_s", "queue_s"}) {
    CAPTURE(d);
    const json& s = r[d];
    CHECK(s["count"] == samples);
    CHECK(s["min"].get<double>() <= s["p50"].get<double>());
    CHECK(s["p50"].get<double>() <= s["p90"].get<double>());
    CHECK(s["p90"].get<double>() <= s["p99"].get<double>());
    CHECK(s["p99"].get<double>() <= s["max"].get<double>());
  }
  // Jobs waited for one of the 4 places, and the first token comes after the wait.
  CHECK(r["queue_s"]["max"].get<double>() > 0);
  CHECK(r["ttft_s"]["max"].get<double>() >= r["queue_s"]["max"].get<double>());
  CHECK(r["ttft_s"]["min"].get<double>() >= r["queue_s"]["min"].get<double>());
  fs::remove_all(dir);
}
