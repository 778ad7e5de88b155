// Batch runs that survive the real world (issue 5), through the loom binary: kill -9 midway
// and --resume gives the uninterrupted run's records, none lost or duplicated; SIGINT stops
// with exit 130 and a report; 3 shards merged equal one unsharded run.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"

using nlohmann::json;

namespace {

const std::string kLoom = std::string(LOOM_BIN_DIR) + "/loom";
const std::string kData = LOOM_TESTDATA;
// A folder of this process: test binaries of several checkouts may run at once.
const std::string kTmp = cli::temp_dir("batch") + "/";

std::string make_jobs(const std::string& path, int n, int frames) {
  return cli::make_tiny_v1_jobs(path, n, frames, /*bad_lines=*/true);
}

// (id, sample or -1 for errors) → the record without its timing.
std::map<std::pair<std::string, int>, json> records(const std::string& path, int* lines = nullptr) {
  std::map<std::pair<std::string, int>, json> m;
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    json r = json::parse(line);  // a torn line would throw here
    r.erase("timing");
    const std::pair<std::string, int> key{r["id"].get<std::string>(), r.value("sample", -1)};
    CHECK(m.count(key) == 0);  // never duplicated
    m[key] = r;
    n++;
  }
  if (lines) *lines = n;
  return m;
}

int sh(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

size_t file_lines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  std::string line;
  while (std::getline(in, line)) n++;
  return n;
}

// Starts loom itself (no shell in between, so signals reach it) with stderr discarded.
pid_t spawn(const std::string& args) {
  std::vector<std::string> words{kLoom};
  std::string w;
  for (char c : args + " ") {
    if (c == ' ') {
      if (!w.empty()) words.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (std::string& s : words) argv.push_back(s.data());
    argv.push_back(nullptr);
    if (std::FILE* null = std::fopen("/dev/null", "w")) dup2(fileno(null), 2);
    execv(kLoom.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

TEST_CASE("kill -9 midway, then --resume: the union equals an uninterrupted run") {
  const std::string jobs = make_jobs(kTmp + "loom_batch_jobs.jsonl", 120, 6);
  const std::string full = kTmp + "loom_batch_full.jsonl", part = kTmp + "loom_batch_part.jsonl";
  std::remove(full.c_str());
  std::remove(part.c_str());
  const std::string common = "run -q --max-seqs 4 --model " + kData + "/tiny_v1 --jobs " + jobs;
  CHECK(sh(kLoom + " " + common + " --overwrite --out " + full) == 1);  // the bad lines fail
  int full_lines = 0;
  const auto want = records(full, &full_lines);
  CHECK(want.size() > 150);

  const pid_t pid =
      spawn("run -q --max-seqs 4 --model " + kData + "/tiny_v1 --jobs " + jobs + " --out " + part);
  const auto t0 = std::chrono::steady_clock::now();
  while (file_lines(part) < 40 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const size_t before = file_lines(part);
  CHECK(before >= 40);
  CHECK(before < size_t(full_lines));  // it really was cut short
  // Tear the last line as a crash in mid-write would.
  {
    std::ofstream tear(part, std::ios::app);
    tear << "{\"id\":\"job-9";
  }
  CHECK(sh(kLoom + " " + common + " --resume --out " + part) == 1);
  int part_lines = 0;
  const auto got = records(part, &part_lines);
  CHECK(part_lines == full_lines);
  CHECK(got == want);
}

TEST_CASE("SIGINT: stop, keep finished records, write the report, exit 130") {
  const std::string jobs = make_jobs(kTmp + "loom_batch_jobs_int.jsonl", 200, 8);
  const std::string out = kTmp + "loom_batch_int.jsonl", rep = kTmp + "loom_batch_int.report.json";
  std::remove(out.c_str());
  std::remove(rep.c_str());
  const pid_t pid = spawn("run -q --max-seqs 2 --model " + kData + "/tiny_v1 --jobs " + jobs +
                          " --overwrite --out " + out + " --report " + rep);
  const auto t0 = std::chrono::steady_clock::now();
  while (file_lines(out) < 10 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  int lines = 0;
  records(out, &lines);  // every line whole
  CHECK(lines >= 10);
  CHECK(lines < 300);
  std::ifstream r(rep);
  REQUIRE(r.good());
  const json report = json::parse(r);
  CHECK(report["jobs_summary"]["stopped"] == true);
  CHECK(report["jobs_summary"]["samples_done"].get<int>() +
            report["jobs_summary"]["failed"].get<int>() ==
        lines);
}

TEST_CASE("3 shards merged equal one unsharded run") {
  const std::string jobs = make_jobs(kTmp + "loom_batch_jobs_shard.jsonl", 40, 3);
  const std::string one = kTmp + "loom_shard_one.jsonl", out = kTmp + "loom_shard.jsonl",
                    merged = kTmp + "loom_shard_merged.jsonl";
  const std::string common = kLoom + " run -q --model " + kData + "/tiny_v1 --jobs " + jobs;
  CHECK(sh(common + " --overwrite --out " + one) == 1);
  for (int k = 0; k < 3; k++) {
    const int rc =
        sh(common + " --overwrite --out " + out + " --shard " + std::to_string(k) + "/3");
    CHECK((rc == 0 || rc == 1));  // 1 where the shard holds a bad line
  }
  // An srun step's ranks under --shard auto work the same way as --shard.
  const int rc = sh("SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=3 SLURM_PROCID=1 " + common +
                    " --shard auto --overwrite --out " + kTmp + "loom_shard_env.jsonl");
  CHECK((rc == 0 || rc == 1));
  CHECK(records(kTmp + "loom_shard_env.shard-1-of-3.jsonl") ==
        records(kTmp + "loom_shard.shard-1-of-3.jsonl"));
  const std::string shard_file = kTmp + "loom_shard.shard-";
  CHECK(sh(kLoom + " merge --jobs " + jobs + " --out " + merged + " " + shard_file +
           "0-of-3.jsonl " + shard_file + "1-of-3.jsonl " + shard_file +
           "2-of-3.jsonl 2>/dev/null") == 1);  // error records present
  int a = 0, b = 0;
  CHECK(records(merged, &a) == records(one, &b));
  CHECK(a == b);
  // Merged order is input order: the line numbers never go down.
  std::ifstream in(merged);
  std::string line;
  int last = 0;
  while (std::getline(in, line)) {
    const int l = json::parse(line)["line"];
    CHECK(l >= last);
    last = l;
  }
  // A missing shard is an error, not a silent partial file.
  CHECK(sh(kLoom + " merge --jobs " + jobs + " --out " + kTmp + "loom_shard_bad.jsonl " +
           shard_file + "0-of-3.jsonl " + shard_file + "1-of-3.jsonl 2>/dev/null") == 2);
}
