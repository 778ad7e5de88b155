// Stop signals (README, exit code 130): SIGINT, SIGTERM and SIGHUP stop a run where it is safe
// to, before its first job as well as during it and while it waits for input; a second signal
// ends the process at once; a signal ignored on entry stays ignored; every command removes the
// temporary file of an atomic write a signal cuts short. Through the loom binary on tiny_v1
// (cpu backend).
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

#include "cli_util.h"

using namespace cli;

namespace {

const std::string kModel = " --model " + kData + "/tiny_v1";

std::string run_args(const std::string& jobs, const std::string& out, const std::string& extra) {
  return "run -q" + kModel + " --jobs " + jobs + " --out " + out + " " + extra;
}

// Sends SIGTERM to `pid` and waits for it to end, 20 s at most (then kill -9): its wait status,
// or nullopt when it did not end; `took`: how long it did take.
std::optional<int> terminate_within_20s(pid_t pid, std::chrono::duration<double>* took = nullptr) {
  kill(pid, SIGTERM);
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  pid_t ended = 0;
  while ((ended = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (took) *took = std::chrono::steady_clock::now() - t0;
  if (ended == pid) return status;
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return std::nullopt;
}

}  // namespace

TEST_CASE("SIGHUP stops as SIGINT does; a closed stdout pipe is an error, not a silent death") {
  const std::string dir = temp_dir("safety_signals");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 400, 8);
  Spawned s = spawn(run_args(jobs, dir + "/r.jsonl", "--max-seqs 2 --report " + dir + "/rep.json"),
                    dir + "/hup.err");
  wait_until_holds(dir + "/r.jsonl", "");
  kill(s.pid, SIGHUP);
  Exit hup = wait_for(s);
  CHECK(hup.code == 130);
  CHECK(json::parse(slurp(dir + "/r.jsonl.loom.json"))["state"] == "stopped");
  CHECK(json::parse(slurp(dir + "/rep.json")).contains("generated"));
  CHECK(!fs::exists(dir + "/r.jsonl.lock"));

  // `loom run --out - | head -c 100`: loom's exit status, through bash's PIPESTATUS.
  const std::string piped = "bash -c '" + kLoom + " " + run_args(jobs, "-", "--max-seqs 2") +
                            " 2>" + dir + "/pipe.err | head -c 100 >/dev/null; " +
                            "exit ${PIPESTATUS[0]}'";
  const int status = std::system(piped.c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(slurp(dir + "/pipe.err").find("cannot write results to stdout: Broken pipe") !=
        std::string::npos);
}

// A signal before the first job (scancel during a checkpoint's load): it killed loom (exit 143)
// with the outputs marked "running" and their locks left, a finished shard among them, which
// merge then refused. Now the run stops (130) and leaves the outputs as they were.
TEST_CASE("SIGTERM before the first job: exit 130, the outputs as they were") {
  const std::string dir = temp_dir("safety_early_signal");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 6, 2);
  const std::string args = run_args(
      jobs, dir + "/o/r.jsonl", "--tokens-out " + dir + "/o/ds --report " + dir + "/o/rep.json");
  // A fresh run, signalled after its checks (before the load): nothing of it is left.
  Exit e = run(args, dir, {"LOOM_TEST_FAULT=started:1:term"});
  CHECK_MESSAGE(e.code == 130, e.err);
  CHECK(!fs::exists(dir + "/o"));
  // A finished run resumed, or overwritten, and signalled after the load: still complete.
  REQUIRE(run(args, dir).code == 0);
  // The files, the manifest as JSON (a resume writes its lines again, keys sorted).
  auto files = [&] {
    auto t = tree(dir + "/o");
    std::vector<json> manifest;
    std::istringstream lines(t[dir + "/o/ds/manifest.jsonl"]);
    for (std::string l; std::getline(lines, l);) manifest.push_back(json::parse(l));
    t.erase(dir + "/o/ds/manifest.jsonl");
    return std::make_pair(t, manifest);
  };
  const auto before = files();
  for (const char* again : {" --resume", " --overwrite"}) {
    CAPTURE(again);
    e = run(args + again, dir, {"LOOM_TEST_FAULT=loaded:1:term"});
    CHECK_MESSAGE(e.code == 130, e.err);
    CHECK(files() == before);  // the side file and dataset.json "complete", no lock
    CHECK(json::parse(slurp(dir + "/o/r.jsonl.loom.json"))["state"] == "complete");
  }
  CHECK(verify_dataset(dir + "/o/ds", dir).code == 0);
}

// A second stop signal ends the process at once (a second Ctrl-C during a long load), leaving
// what kill -9 would: --resume then finishes the run.
TEST_CASE("a second stop signal ends the process at once; --resume finishes the run") {
  const std::string dir = temp_dir("safety_second_signal");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 6, 2);
  const std::string args = run_args(jobs, dir + "/r.jsonl", "--tokens-out " + dir + "/ds");
  Exit e = run(args, dir, {"LOOM_TEST_FAULT=loaded:1:term2"});
  CHECK(e.signal == SIGTERM);
  CHECK(json::parse(slurp(dir + "/r.jsonl.loom.json"))["state"] == "running");
  e = run(args + " --resume", dir);
  CHECK_MESSAGE(e.code == 0, e.err);
  CHECK(json::parse(slurp(dir + "/r.jsonl.loom.json"))["state"] == "complete");
  CHECK(verify_dataset(dir + "/ds", dir).code == 0);
}

// A command killed inside an atomic write (calibrate's scales, merge's index) left
// `<out>.tmp-<pid>` beside its output, which no later run removed.
TEST_CASE("SIGTERM inside an atomic write leaves no temporary file") {
  const std::string dir = temp_dir("safety_atomic_signal");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 4, 2);
  Exit e = run(
      "calibrate --backend cpu" + kModel + " --jobs " + jobs + " --out " + dir + "/out/scales.json",
      dir, {"LOOM_TEST_FAULT=atomic-write:1:term"});
  CHECK(e.signal == SIGTERM);
  CHECK(fs::is_empty(dir + "/out"));  // neither the scales nor their temporary file
  // `loom run` stops cleanly instead: the write completes, the run goes on to a stop.
  e = run(run_args(jobs, dir + "/r.jsonl", ""), dir, {"LOOM_TEST_FAULT=atomic-write:1:term"});
  CHECK(e.code == 130);
  for (const auto& de : fs::directory_iterator(dir))
    CHECK(de.path().filename().string().find(".tmp-") == std::string::npos);
}

// `nohup loom run ... &`: a SIGHUP ignored on entry stays ignored (the run overrode it).
TEST_CASE("a stop signal ignored on entry stays ignored (nohup)") {
  const std::string dir = temp_dir("safety_nohup");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 60, 8);
  std::vector<std::string> words = split_words(run_args(jobs, dir + "/r.jsonl", "--max-seqs 2"));
  words.insert(words.begin(), kLoom);
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGHUP, SIG_IGN);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    execv(kLoom.c_str(), argv.data());
    _exit(127);
  }
  wait_until_holds(dir + "/r.jsonl", "");
  kill(pid, SIGHUP);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(json::parse(slurp(dir + "/r.jsonl.loom.json"))["state"] == "complete");
}

// A writer that holds the FIFO open without writing (after its last line, or `tail` inside a
// line): the read blocked through SIGTERM (its handler restarts it) until the writer wrote
// again or closed. The half line is not a job: no error is recorded for it.
void silent_fifo_writer(const std::string& name, const std::string& tail) {
  const std::string dir = temp_dir(name);
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 2, 2);
  const std::string fifo = dir + "/jobs.fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  Spawned s =
      spawn(run_args(fifo, dir + "/r.jsonl", "--report " + dir + "/rep.json"), dir + "/run.err");
  const pid_t writer = fork();
  if (writer == 0) {
    std::ofstream out(fifo);
    out << slurp(jobs) << tail << std::flush;
    ::sleep(60);  // open and silent
    _exit(0);
  }
  // Both jobs done: the run now waits for a third line that does not come.
  const auto t0 = std::chrono::steady_clock::now();
  while (slurp(dir + "/r.jsonl").find("job-1") == std::string::npos &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::chrono::duration<double> took{};
  const std::optional<int> status = terminate_within_20s(s.pid, &took);
  kill(writer, SIGKILL);
  waitpid(writer, nullptr, 0);
  REQUIRE_MESSAGE(status, "loom run --jobs FIFO did not stop within 20 s of SIGTERM");
  CHECK(took.count() < 5.0);
  REQUIRE(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 130);
  CHECK(json::parse(slurp(dir + "/r.jsonl.loom.json"))["state"] == "stopped");
  const json rep = json::parse(slurp(dir + "/rep.json"));
  CHECK(rep["jobs_summary"]["samples_done"] >= 2);
  CHECK(rep["jobs_summary"]["read"] == 2);
  CHECK(rep["jobs_summary"]["failed"] == 0);
}

TEST_CASE("SIGTERM while the jobs FIFO's writer is silent: the run stops at once") {
  silent_fifo_writer("safety_silent_fifo", "");
}

TEST_CASE("SIGTERM while the jobs FIFO's writer is silent inside a line: the run stops at once") {
  silent_fifo_writer("safety_half_line_fifo", "{\"id\": \"half\", \"fra");
}

TEST_CASE("SIGTERM while the reader is inside a line that never ends (--jobs /dev/zero)") {
  const std::string dir = temp_dir("safety_endless_line");
  Spawned s = spawn(run_args("/dev/zero", dir + "/r.jsonl", "--report " + dir + "/rep.json"),
                    dir + "/run.err");
  wait_until_holds(dir + "/r.jsonl.loom.json", "running");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Before: the read went on to the end of the line, i.e. for ever (the test's kill -9).
  const std::optional<int> status = terminate_within_20s(s.pid);
  REQUIRE_MESSAGE(status, "loom run --jobs /dev/zero did not stop within 20 s of SIGTERM");
  REQUIRE(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 130);
  CHECK(json::parse(slurp(dir + "/r.jsonl.loom.json"))["state"] == "stopped");
  const json rep = json::parse(slurp(dir + "/rep.json"));
  CHECK(rep["jobs_summary"]["stopped"] == true);
  CHECK(rep["jobs_summary"]["read"] == 0);
}
