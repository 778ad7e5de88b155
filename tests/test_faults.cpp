// The dataset factory under faults (issue 11 §7), through the loom binary on tiny_v1 (the cpu
// backend's tokens do not depend on the batch, so any interrupted-and-resumed run must give
// exactly the uninterrupted run's tokens): kill -9 at seeded instants and at each commit
// point, a full disk and a file-size limit, unwritable outputs, a second writer, stale or
// foreign results. After every resume: no (id, sample) missing or twice, in the results and
// in the dataset.
#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "cli_util.h"
#include "core/philox.h"

using namespace cli;

namespace {

const std::string kModel = " --model " + kData + "/tiny_v1";

struct Reference {
  std::string jobs;
  std::map<std::pair<std::string, int>, json> tokens;
};

// 40 jobs (60 samples) and their uninterrupted run, made once per process.
const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    const std::string dir = temp_dir("faults_ref");
    r.jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 40, 5);
    Exit e = run("run -q --max-seqs 4" + kModel + " --jobs " + r.jobs + " --out " + dir +
                     "/r.jsonl --tokens-out " + dir + "/ds --samples-per-file 3",
                 dir);
    REQUIRE(e.code == 0);
    r.tokens = tokens_by_sample(dir + "/r.jsonl");
    REQUIRE(r.tokens.size() == 60);
    REQUIRE(dataset_samples(dir + "/ds") == r.tokens);
    return r;
  }();
  return ref;
}

std::string run_args(const std::string& dir, const std::string& extra = "") {
  return "run -q --max-seqs 4" + kModel + " --jobs " + reference().jobs + " --out " + dir +
         "/out/r.jsonl --tokens-out " + dir + "/out/ds --samples-per-file 3 " + extra;
}

// Resumes to the end and checks results and dataset against the uninterrupted run.
void resume_and_compare(const std::string& dir, const std::string& what) {
  Exit e = run(run_args(dir, "--resume"), dir);
  CHECK_MESSAGE(e.code == 0, what, ": ", e.err);
  CHECK_MESSAGE(tokens_by_sample(dir + "/out/r.jsonl") == reference().tokens, what);
  CHECK_MESSAGE(dataset_samples(dir + "/out/ds") == reference().tokens, what);
  const json info = json::parse(slurp(dir + "/out/ds/dataset.json"));
  CHECK(info["totals"]["samples"] == 60);
  for (const auto& de : fs::directory_iterator(dir + "/out/ds")) {
    const std::string n = de.path().filename().string();
    CHECK_MESSAGE((n.find(".tmp-") == std::string::npos || n.find(".shard-0-of-2") != n.npos),
                  "stale temporary file ", de.path().string());
  }
}

// `loom verify` finds the resumed dataset whole: every file's SHA-256 as recorded.
void check_verified(const std::string& dir, const std::string& what) {
  const Verified v = verify_dataset(dir + "/out/ds", dir);
  CHECK_MESSAGE(v.code == 0, what, ": ", v.out.dump(), v.err);
  CHECK_MESSAGE(v.out.value("checksums_matched", -1) == v.out.value("files", -2), what);
  CHECK(v.out.value("samples", 0) == 60);
}

}  // namespace

TEST_CASE("kill -9 at 24 seeded instants, resumed each time: the uninterrupted run's tokens") {
  const std::string dir = temp_dir("faults_kill");
  // A new schedule every run; LOOM_TEST_KILL_SEED=<seed> replays the one a failure printed.
  const char* replay = std::getenv("LOOM_TEST_KILL_SEED");
  const unsigned seed = replay ? unsigned(std::stoul(replay)) : unsigned(std::random_device{}());
  INFO("kill schedule seed ", seed, " (LOOM_TEST_KILL_SEED=", seed, " replays it)");
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(5, 160);
  int killed = 0;
  for (int i = 0; i < 24; ++i) {
    Spawned s = spawn(run_args(dir, i == 0 ? "" : "--resume"), dir + "/stderr.txt");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    kill(s.pid, SIGKILL);
    Exit e = wait_for(s);
    killed += e.signal == SIGKILL;
    CHECK_MESSAGE((e.signal == SIGKILL || e.code == 0), "attempt ", i, ": ", e.err);
  }
  CHECK(killed >= 12);  // most attempts were really cut short
  resume_and_compare(dir, "after 24 kills");
  check_verified(dir, "after 24 kills");
}

TEST_CASE("LOOM_TEST_FAULT: killed at each commit point, then resumed") {
  for (const std::string point : {"data-file:1", "data-file:4", "checksums:2", "manifest:1",
                                  "manifest:3", "record:1", "record:2", "record:7"}) {
    CAPTURE(point);
    const std::string dir = temp_dir("faults_point");
    Exit e = run(run_args(dir), dir, {"LOOM_TEST_FAULT=" + point});
    CHECK(e.signal == SIGKILL);
    // Temporary files a writer killed mid-write leaves: ours go, another shard's stay.
    const std::string ds = dir + "/out/ds/";
    for (const char* stale : {"data-000099.safetensors.tmp-1", "manifest.jsonl.tmp-2",
                              "dataset.json.tmp-3", "data-000001.shard-0-of-2.safetensors.tmp-4"})
      std::ofstream(ds + stale) << "partial";
    resume_and_compare(dir, point);
    CHECK(fs::exists(ds + "data-000001.shard-0-of-2.safetensors.tmp-4"));
    fs::remove(ds + "data-000001.shard-0-of-2.safetensors.tmp-4");
    check_verified(dir, point);
  }
}

TEST_CASE("a file-size limit: EFBIG is a fatal error naming the file; resume completes") {
  const std::string dir = temp_dir("faults_fsize");
  // 12 kB: the results file (about 1.5 kB a record) passes it after a few commits.
  Exit e = run(run_args(dir), dir, {}, 12000);
  INFO(e.err);
  CHECK(e.signal == 0);  // SIGXFSZ is ignored: the write fails instead of killing loom
  CHECK(e.code == 2);
  CHECK(e.err.rfind("loom: error: cannot write ", 0) == 0);
  CHECK(e.err.find(dir + "/out/") != std::string::npos);
  CHECK(e.err.find("File too large") != std::string::npos);
  // No run writes the output now: its side file (small enough to pass) says so, and why.
  const json side = json::parse(slurp(dir + "/out/r.jsonl.loom.json"));
  CHECK(side["state"] == "failed");
  CHECK(e.err.find(side["error"].get<std::string>()) != std::string::npos);
  // And the dataset's index, which said "running" (as if a run still wrote it).
  const json info = json::parse(slurp(dir + "/out/ds/dataset.json"));
  CHECK(info["state"] == "failed");
  CHECK(info["error"] == side["error"]);
  resume_and_compare(dir, "after EFBIG");
}

TEST_CASE("a full disk (a small tmpfs): rc 2 naming the file; resume after space is freed") {
  const std::string dir = temp_dir("faults_enospc");
  // A private mount namespace lets the test mount a 24 kB tmpfs without touching the host.
  const std::string script = dir + "/full.sh";
  {
    std::ofstream sh(script);
    sh << "set -u\n"
       << "mkdir -p " << dir << "/out && mount -t tmpfs -o size=24k tmpfs " << dir
       << "/out || exit 77\n"
       << kLoom << " " << run_args(dir) << " 2>" << dir << "/full.err; echo $? >" << dir
       << "/full.rc\n"
       << "mount -o remount,size=8m " << dir << "/out\n"
       << kLoom << " " << run_args(dir, "--resume") << " 2>" << dir << "/resume.err; echo $? >"
       << dir << "/resume.rc\n"
       << "cp -r " << dir << "/out " << dir << "/saved\n";
  }
  const int status = std::system(("unshare -m sh " + script + " 2>/dev/null").c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    MESSAGE(
        "SKIPPED the tmpfs case: no private mount namespace here (needs root); the "
        "file-size-limit case covers the same write path");
    return;
  }
  CHECK(slurp(dir + "/full.rc") == "2\n");
  const std::string err = slurp(dir + "/full.err");
  CHECK(err.find("No space left on device") != std::string::npos);
  CHECK(err.find(dir + "/out/") != std::string::npos);
  CHECK(slurp(dir + "/resume.rc") == "0\n");
  CHECK(tokens_by_sample(dir + "/saved/r.jsonl") == reference().tokens);
  CHECK(dataset_samples(dir + "/saved/ds") == reference().tokens);
}

TEST_CASE(
    "unwritable --out, --report, --tokens-out: refused before the model loads, nothing made") {
  const std::string dir = temp_dir("faults_unwritable");
  { std::ofstream(dir + "/a_file") << "x"; }
  const std::string base = "run -q" + kModel + " --jobs " + reference().jobs;
  struct Case {
    std::string args, expect;
  } cases[] = {
      {" --out " + dir + "/a_file/r.jsonl",
       "--out " + dir + "/a_file/r.jsonl: " + dir + "/a_file is not a folder"},
      {" --out /proc/loom_r.jsonl", "--out /proc/loom_r.jsonl: cannot create files in /proc"},
      {" --out " + dir + "/o/r.jsonl --report /proc/loom_report.json",
       "--report /proc/loom_report.json: cannot create files in /proc"},
      {" --out " + dir + "/o/r.jsonl --tokens-out " + dir + "/a_file",
       "--tokens-out " + dir +
           "/a_file: expected a folder (or a path to create one), found a file"},
      {" --out " + dir + "/o/r.jsonl --tokens-out /proc/loom_ds",
       "--tokens-out /proc/loom_ds: cannot create files in /proc"},
      {" --out " + dir + "/o", "--out " + dir + "/o: expected a file path, found a folder"},
  };
  fs::create_directories(dir + "/o");
  for (const Case& c : cases) {
    CAPTURE(c.args);
    Exit e = run(base + c.args, dir);
    CHECK(e.code == 2);
    CHECK(e.err.rfind("loom: error: " + c.expect, 0) == 0);
    CHECK(std::count(e.err.begin(), e.err.end(), '\n') == 1);  // one line
    CHECK(!fs::exists(dir + "/o/r.jsonl"));
    CHECK(!fs::exists(dir + "/o/r.jsonl.loom.json"));
  }
  CHECK(fs::is_empty(dir + "/o"));
}

TEST_CASE("two runs on one --out: the second fails at once naming the first") {
  const std::string dir = temp_dir("faults_two");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 400, 8);
  const std::string args = "run -q --max-seqs 2" + kModel + " --jobs " + jobs + " --out " + dir +
                           "/r.jsonl --tokens-out " + dir + "/ds";
  Spawned first = spawn(args, dir + "/first.err");
  const auto t0 = std::chrono::steady_clock::now();
  while (slurp(dir + "/r.jsonl.lock").find("pid") == std::string::npos &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto t1 = std::chrono::steady_clock::now();
  Exit second = run(args + " --resume", dir);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  // --no-lock takes no lock but sees a held one (it tore and doubled records); the folders a
  // refused run made for its other outputs go again.
  Exit no_lock = run(args + " --resume --no-lock", dir);
  Exit folders = run(args + " --overwrite --report " + dir + "/new/rep/x.json", dir);
  kill(first.pid, SIGKILL);
  wait_for(first);
  CHECK(second.code == 2);
  CHECK(second.err.find("loom: error: --out " + dir +
                        "/r.jsonl is being written by another "
                        "loom run (host ") != std::string::npos);
  CHECK(second.err.find(" pid " + std::to_string(first.pid) + " since ") != std::string::npos);
  CHECK(second.err.find("this run is host ") != std::string::npos);
  CHECK(took < 5.0);  // at once, not after loading or waiting
  CHECK(no_lock.code == 2);
  CHECK(no_lock.err.find("--out " + dir + "/r.jsonl is being written by another loom run") !=
        std::string::npos);
  CHECK(no_lock.err.find("--no-lock skips taking locks, not another run's") != std::string::npos);
  CHECK(folders.code == 2);
  CHECK(!fs::exists(dir + "/new"));

  // Two shards share one dataset folder: each locks only its own files.
  const std::string sd = dir + "/shared";
  Spawned s0 = spawn("run -q" + kModel + " --jobs " + reference().jobs + " --shard 0/2 --out " +
                         sd + "/r.jsonl --tokens-out " + sd + "/ds",
                     dir + "/s0.err");
  Exit s1 = run("run -q" + kModel + " --jobs " + reference().jobs + " --shard 1/2 --out " + sd +
                    "/r.jsonl --tokens-out " + sd + "/ds",
                dir);
  CHECK(wait_for(s0).code == 0);
  CHECK(s1.code == 0);
  auto all = tokens_by_sample(sd + "/r.shard-0-of-2.jsonl");
  for (auto& kv : tokens_by_sample(sd + "/r.shard-1-of-2.jsonl")) all.insert(kv);
  CHECK(all == reference().tokens);
  CHECK(dataset_samples(sd + "/ds") == reference().tokens);
}

TEST_CASE("finished results are never replaced or continued by accident") {
  const std::string dir = temp_dir("faults_stale");
  REQUIRE(run(run_args(dir), dir).code == 0);
  const std::string before = slurp(dir + "/out/r.jsonl");

  Exit again = run(run_args(dir), dir);  // neither --resume nor --overwrite
  CHECK(again.code == 2);
  CHECK(again.err == "loom: error: --out " + dir +
                         "/out/r.jsonl already holds results; pass --resume to continue it, "
                         "--overwrite to replace it, or choose a new --out\n");
  CHECK(slurp(dir + "/out/r.jsonl") == before);

  // Another model, another option: the side file names both sides.
  Exit other = run("run -q --model " + kData + "/tiny_v2 --jobs " + reference().jobs + " --out " +
                       dir + "/out/r.jsonl --tokens-out " + dir + "/out/ds --resume",
                   dir);
  CHECK(other.code == 2);
  CHECK(other.err.find("--resume: " + dir + "/out/r.jsonl was made with model_fingerprint = ") !=
        std::string::npos);
  Exit overlap = run(run_args(dir, "--resume --overlap 2"), dir);
  CHECK(overlap.code == 2);
  CHECK(overlap.err.find("was made with overlap = 3, this run has overlap = 2") !=
        std::string::npos);
  CHECK(slurp(dir + "/out/r.jsonl") == before);

  // Results of an older loom (draw stream 1: no draw_stream in the side file) draw other tokens
  // for the same seeds: resuming them would mix two streams in one dataset.
  const std::string side = slurp(dir + "/out/r.jsonl.loom.json");
  json old_side = json::parse(side);
  REQUIRE(old_side["identity"]["draw_stream"] == loom::kDrawStream);
  old_side["identity"].erase("draw_stream");
  std::ofstream(dir + "/out/r.jsonl.loom.json") << old_side.dump();
  Exit stream1 = run(run_args(dir, "--resume"), dir);
  CHECK(stream1.code == 2);
  CHECK(
      stream1.err.find("was made with draw_stream = \"(absent)\", this run has draw_stream = 4") !=
      std::string::npos);
  std::ofstream(dir + "/out/r.jsonl.loom.json") << side;
  CHECK(slurp(dir + "/out/r.jsonl") == before);

  // Without its side file the records cannot be vouched for.
  fs::rename(dir + "/out/r.jsonl.loom.json", dir + "/out/side.json");
  Exit orphan = run(run_args(dir, "--resume"), dir);
  CHECK(orphan.code == 2);
  CHECK(orphan.err.find("r.jsonl.loom.json is missing") != std::string::npos);
  fs::rename(dir + "/out/side.json", dir + "/out/r.jsonl.loom.json");

  // --overwrite replaces results and this shard's dataset.
  Exit over = run(run_args(dir, "--overwrite"), dir);
  CHECK(over.code == 0);
  CHECK(tokens_by_sample(dir + "/out/r.jsonl") == reference().tokens);
  CHECK(dataset_samples(dir + "/out/ds") == reference().tokens);
  CHECK(run(run_args(dir, "--overwrite --resume"), dir).code == 2);
}

TEST_CASE("an sbatch script's variables without a step: every job; merge of 2 of 3 shards fails") {
  const std::string dir = temp_dir("faults_sbatch");
  // sbatch --ntasks=4 exports these to the batch script; a plain `loom run` there is one process.
  Exit e = run("run" + kModel + " --jobs " + reference().jobs + " --out " + dir + "/r.jsonl", dir,
               {"SLURM_JOB_ID=77", "SLURM_NTASKS=4", "SLURM_PROCID=0"});
  CHECK(e.code == 0);
  CHECK(tokens_by_sample(dir + "/r.jsonl") == reference().tokens);
  CHECK(e.err.find("loom: warning: ") != std::string::npos);
  CHECK(!fs::exists(dir + "/r.shard-0-of-4.jsonl"));

  for (int k : {0, 1})
    REQUIRE(run("run -q" + kModel + " --jobs " + reference().jobs + " --shard " +
                    std::to_string(k) + "/3 --out " + dir + "/s.jsonl",
                dir)
                .code == 0);
  const std::string inputs = " " + dir + "/s.shard-0-of-3.jsonl " + dir + "/s.shard-1-of-3.jsonl";
  Exit gap = run("merge --out " + dir + "/m.jsonl" + inputs, dir);
  CHECK(gap.code == 2);
  CHECK(gap.err.find("shard 2") != std::string::npos);
  CHECK(!fs::exists(dir + "/m.jsonl"));
  Exit partial = run(
      "merge --allow-partial --jobs " + reference().jobs + " --out " + dir + "/m.jsonl" + inputs,
      dir);
  CHECK(partial.code == 1);
  CHECK(partial.err.find("partial merge: missing shard 2 of 3") != std::string::npos);
  size_t in_shards_0_1 = 0;  // job-i is on line i + 1, in shard i % 3
  for (const auto& kv : reference().tokens)
    in_shards_0_1 += std::stoi(kv.first.first.substr(4)) % 3 != 2;
  CHECK(tokens_by_sample(dir + "/m.jsonl").size() == in_shards_0_1);
}
