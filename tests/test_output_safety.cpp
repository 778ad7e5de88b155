// Outputs are never lost, overwritten or mixed (README "Outputs that are never lost..."), for
// the ways an audit found them to be: one file under two spellings, an output onto the jobs
// file or into the dataset's names, a --report onto another run's --out, --resume onto another
// run's dataset, options that change tokens, an unsharded dataset under merge --dataset, and
// merges of shards of two runs, unfinished shards or onto an existing file. Through the loom
// binary on tiny_v1 (cpu backend).
#include <chrono>
#include <thread>

#include "cli_util.h"
#include "core/fnv.h"

using namespace cli;

namespace {

const std::string kModel = " --model " + kData + "/tiny_v1";

std::string run_args(const std::string& jobs, const std::string& out, const std::string& extra) {
  return "run -q" + kModel + " --jobs " + jobs + " --out " + out + " " + extra;
}

}  // namespace

TEST_CASE("one file under two names: refused before anything is created") {
  const std::string dir = temp_dir("safety_alias");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 4, 2);
  fs::create_directories(dir + "/real");
  fs::create_directory_symlink(dir + "/real", dir + "/link");
  const std::string jobs_bytes = slurp(jobs);

  struct Case {
    std::string args, error;
  };
  const std::string o = dir + "/o/r.jsonl";
  const std::vector<Case> cases = {
      {run_args(jobs, o, "--report " + dir + "/o/./r.jsonl"),
       "--report " + dir + "/o/./r.jsonl is the same file as --out " + o},
      {run_args(jobs, dir + "/real/r.jsonl", "--report " + dir + "/link/r.jsonl"),
       "--report " + dir + "/link/r.jsonl is the same file as --out " + dir + "/real/r.jsonl"},
      {run_args(jobs, o, "--report " + o + ".loom.json"),
       "--report " + o + ".loom.json is the same file as --out's side file"},
      {run_args(jobs, o, "--report " + o + ".lock"),
       "--report " + o + ".lock is the same file as --out's lock file"},
      {run_args(jobs, jobs, "--overwrite"), "--out " + jobs + " is the same file as --jobs " +
                                                jobs + "; loom would overwrite the jobs it reads"},
      {run_args(
           jobs, o,
           "--resume --report " + dir + "/../" + fs::path(dir).filename().string() + "/jobs.jsonl"),
       "the same file as --jobs " + jobs + "; loom would overwrite the jobs it reads"},
      {run_args(jobs, o, "--tokens-out " + o),
       "--tokens-out " + o + " is or lies inside --out " + o},
      {run_args(jobs, dir + "/o/ds/dataset.json", "--tokens-out " + dir + "/o/ds"),
       "--out " + dir + "/o/ds/dataset.json takes a name the dataset writes in --tokens-out"},
      {run_args(jobs, o, "--tokens-out " + dir + "/o/ds --report " + dir + "/o/ds/manifest.jsonl"),
       "--report " + dir + "/o/ds/manifest.jsonl takes a name the dataset writes"},
  };
  for (const Case& c : cases) {
    Exit e = run(c.args, dir);
    CHECK_MESSAGE(e.code == 2, c.args);
    CHECK_MESSAGE(e.err.find(c.error) != std::string::npos, e.err, " lacks: ", c.error);
    CHECK(!fs::exists(dir + "/o"));
    CHECK(fs::is_empty(dir + "/real"));
    CHECK(slurp(jobs) == jobs_bytes);
  }

  // Results in the dataset folder under a name of their own are fine.
  Exit inside =
      run(run_args(jobs, dir + "/o/ds/results.jsonl", "--tokens-out " + dir + "/o/ds"), dir);
  CHECK(inside.code == 0);
  CHECK(tokens_by_sample(dir + "/o/ds/results.jsonl") == dataset_samples(dir + "/o/ds"));
}

TEST_CASE("a --report onto a running run's --out or --report fails at once; its records are kept") {
  const std::string dir = temp_dir("safety_report_lock");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 400, 8);
  Spawned first =
      spawn(run_args(jobs, dir + "/a.jsonl", "--max-seqs 2 --report " + dir + "/rep.json"),
            dir + "/a.err");
  wait_until_holds(dir + "/a.jsonl", "");
  // --overwrite passes the check for an existing --report; what holds it off is that a.jsonl is
  // a run's results (its side file beside it), and that rep.json is locked by the run.
  const std::string b_jobs = make_tiny_v1_jobs(dir + "/b_jobs.jsonl", 2, 2);
  Exit onto_out =
      run(run_args(b_jobs, dir + "/b.jsonl", "--overwrite --report " + dir + "/a.jsonl"), dir);
  Exit onto_report =
      run(run_args(b_jobs, dir + "/b.jsonl", "--overwrite --report " + dir + "/rep.json"), dir);
  kill(first.pid, SIGKILL);
  wait_for(first);
  CHECK(onto_out.code == 2);
  CHECK(onto_out.err.find("--report " + dir + "/a.jsonl is a loom run's results file") !=
        std::string::npos);
  CHECK(onto_report.code == 2);
  CHECK(
      onto_report.err.find("--report " + dir + "/rep.json is being written by another loom run") !=
      std::string::npos);
  CHECK(onto_report.err.find(" pid " + std::to_string(first.pid) + " since ") != std::string::npos);
  const std::vector<json> records = read_lines(dir + "/a.jsonl");
  CHECK(!records.empty());
  for (const json& r : records) CHECK(r["status"] == "ok");
  CHECK(!fs::exists(dir + "/b.jsonl"));
}

TEST_CASE("--resume with another --out never rolls back a dataset that is not its own") {
  const std::string dir = temp_dir("safety_owner");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 8, 2);
  REQUIRE(run(run_args(jobs, dir + "/a.jsonl",
                       "--tokens-out " + dir + "/ds --samples-per-file 3 --no-tokens-in-results"),
              dir)
              .code == 0);
  const auto before = tree(dir + "/ds");
  Exit other = run(run_args(jobs, dir + "/b.jsonl", "--tokens-out " + dir + "/ds --resume"), dir);
  CHECK(other.code == 2);
  CHECK(other.err.find("--tokens-out " + dir +
                       "/ds shard 0/1 holds the samples of the results "
                       "file " +
                       dir + "/a.jsonl") != std::string::npos);
  CHECK(tree(dir + "/ds") == before);
  CHECK(!fs::exists(dir + "/b.jsonl"));
  // Its own results resume it (nothing left to do: no file rolled back).
  CHECK(run(run_args(jobs, dir + "/a.jsonl",
                     "--tokens-out " + dir + "/ds --no-tokens-in-results --resume"),
            dir)
            .code == 0);
  CHECK(dataset_samples(dir + "/ds").size() == 12);
}

TEST_CASE("a dataset and a report belong to their results file: no other run replaces them") {
  const std::string dir = temp_dir("safety_belong");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 8, 2);
  const std::string a = run_args(
      jobs, dir + "/a/r.jsonl",
      "--report " + dir + "/a/rep.json --tokens-out " + dir + "/a/ds --samples-per-file 3");
  REQUIRE(run(a, dir).code == 0);
  const auto before = tree(dir + "/a");

  // Another --out with A's report or dataset.json as its --report under --resume, or A's side
  // file as its --report or --out whatever the flags.
  const std::string only_own =
      "; --resume replaces only the report of its own --out (" + dir + "/b/r.jsonl)";
  const std::string a_side = dir + "/a/r.jsonl.loom.json";
  for (const auto& [extra, error] : std::vector<std::pair<std::string, std::string>>{
           {"--resume --report " + dir + "/a/rep.json", only_own},
           {"--resume --report " + dir + "/a/ds/dataset.json",
            "--report " + dir + "/a/ds/dataset.json is a file of the token dataset in"},
           {"--overwrite --report " + a_side, "--report " + a_side + " is a loom run's side file"},
           {"--resume --report " + a_side, "--report " + a_side + " is a loom run's side file"}}) {
    Exit e = run(run_args(jobs, dir + "/b/r.jsonl", extra), dir);
    CHECK(e.code == 2);
    CHECK_MESSAGE(e.err.find(error) != std::string::npos, e.err, " lacks: ", error);
  }
  Exit side_out = run(run_args(jobs, a_side, "--overwrite"), dir);
  CHECK(side_out.code == 2);
  CHECK(side_out.err.find("--out " + a_side + " is a loom run's side file") != std::string::npos);
  Exit side_json = run("bench --backend cpu" + kModel +
                           " --frames 1 --context-frames 1 --overwrite "
                           "--json " +
                           a_side,
                       dir);
  CHECK(side_json.code == 2);
  CHECK(side_json.err.find("bench: --json " + a_side + " is a loom run's side file") !=
        std::string::npos);
  // --overwrite of another --out onto A's dataset: A's records would name replaced files.
  Exit over =
      run(run_args(jobs, dir + "/b/r.jsonl", "--overwrite --tokens-out " + dir + "/a/ds"), dir);
  CHECK(over.code == 2);
  CHECK(over.err.find("holds the samples of the results file " + dir + "/a/r.jsonl (") !=
        std::string::npos);
  CHECK(over.err.find("--overwrite would remove them under its records") != std::string::npos);
  CHECK(tree(dir + "/a") == before);
  CHECK(!fs::exists(dir + "/b"));

  // A's results and side file moved away: resuming would roll every data file back.
  fs::create_directories(dir + "/archive");
  for (const char* f : {"r.jsonl", "r.jsonl.loom.json"})
    fs::rename(dir + "/a/" + f, dir + "/archive/" + f);
  Exit moved = run(a + " --resume", dir);
  CHECK(moved.code == 2);
  CHECK(moved.err.find("--out " + dir +
                       "/a/r.jsonl and its side file are missing, but "
                       "--tokens-out " +
                       dir + "/a/ds shard 0/1 holds 4 data files") != std::string::npos);
  // An empty results file beside its side file: more than one file without records is
  // another results file's dataset, never rolled back.
  std::ofstream(dir + "/a/r.jsonl").close();
  fs::copy_file(dir + "/archive/r.jsonl.loom.json", dir + "/a/r.jsonl.loom.json");
  Exit emptied = run(a + " --resume", dir);
  CHECK(emptied.code == 2);
  CHECK(emptied.err.find("--resume: 4 data files of " + dir +
                         "/a/ds have samples with no "
                         "record in " +
                         dir + "/a/r.jsonl") != std::string::npos);
  CHECK(dataset_samples(dir + "/a/ds").size() == 12);
  for (const char* f : {"r.jsonl", "r.jsonl.loom.json"})
    fs::rename(dir + "/archive/" + f, dir + "/a/" + f);
  CHECK(run(a + " --resume", dir).code == 0);
  CHECK(tokens_by_sample(dir + "/a/r.jsonl") == dataset_samples(dir + "/a/ds"));

  // Through a symlinked folder, the same run resumes.
  fs::create_directory_symlink(dir + "/a", dir + "/alink");
  CHECK(run(run_args(jobs, dir + "/alink/r.jsonl",
                     "--report " + dir + "/alink/rep.json --tokens-out " + dir +
                         "/alink/ds --samples-per-file 3 --resume"),
            dir)
            .code == 0);
  // An older loom wrote tokens_out as spelled: the folder behind the link still resumes.
  json side = json::parse(slurp(dir + "/a/r.jsonl.loom.json"));
  side["identity"]["tokens_out"] = dir + "/alink/ds";
  std::ofstream(dir + "/a/r.jsonl.loom.json") << side.dump();
  CHECK(run(a + " --resume", dir).code == 0);
}

TEST_CASE("--resume refuses sampling defaults and dataset options other than the run's") {
  const std::string dir = temp_dir("safety_identity");
  // Jobs without "sampling": the defaults decide their tokens.
  std::ifstream in(make_tiny_v1_jobs(dir + "/with.jsonl", 6, 2));
  std::ofstream jobs_out(dir + "/jobs.jsonl");
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    j.erase("sampling");
    jobs_out << j.dump() << "\n";
  }
  jobs_out.close();
  const std::string jobs = dir + "/jobs.jsonl";
  const std::string base = "--tokens-out " + dir + "/ds --seed 7 --no-dataset-actions";
  REQUIRE(run(run_args(jobs, dir + "/r.jsonl", base), dir).code == 0);
  const std::string records = slurp(dir + "/r.jsonl");
  struct Case {
    std::string extra, error;
  };
  for (const Case& c :
       std::vector<Case>{{"--tokens-out " + dir + "/ds --seed 8 --no-dataset-actions",
                          "was made with seed = 7, this run has seed = 8"},
                         {"--tokens-out " + dir + "/ds --no-dataset-actions",
                          "was made with seed = 7, this run has none"},
                         {base + " --temperature 0.5",
                          "was made with temperature = \"(absent)\", this run has "
                          "temperature = 0.5"},
                         {"--tokens-out " + dir + "/ds --seed 7",
                          "was made with dataset_actions = false, this run has none"}}) {
    Exit e = run(run_args(jobs, dir + "/r.jsonl", c.extra + " --resume"), dir);
    CHECK(e.code == 2);
    CHECK_MESSAGE(e.err.find(c.error) != std::string::npos, e.err, " lacks: ", c.error);
    CHECK(slurp(dir + "/r.jsonl") == records);
  }
  CHECK(run(run_args(jobs, dir + "/r.jsonl", base + " --resume"), dir).code == 0);
  CHECK(slurp(dir + "/r.jsonl") == records);
}

TEST_CASE("--resume and merge --jobs refuse a jobs file whose lines changed under the same ids") {
  const std::string dir = temp_dir("safety_line_hash");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 6, 2);
  REQUIRE(run(run_args(jobs, dir + "/r.jsonl", ""), dir).code == 0);
  // Every record carries its job line's hash.
  std::ifstream in(jobs);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (const json& r : read_lines(dir + "/r.jsonl"))
    CHECK(r["line_hash"] == loom::hex64(loom::fnv1a64(lines[r["line"].get<size_t>() - 1])));

  // The same ids, other frame counts: made again, not the file the records came from.
  const std::string records = slurp(dir + "/r.jsonl"), side = slurp(dir + "/r.jsonl.loom.json");
  const std::string other = make_tiny_v1_jobs(dir + "/other.jsonl", 7, 3);
  Exit merged =
      run("merge --jobs " + other + " --out " + dir + "/m.jsonl " + dir + "/r.jsonl", dir);
  CHECK(merged.code == 2);
  CHECK(merged.err.find("was made from another text of that line than " + other) !=
        std::string::npos);
  CHECK(!fs::exists(dir + "/m.jsonl"));
  Exit resumed = run(run_args(other, dir + "/r.jsonl", "--resume"), dir);
  CHECK(resumed.code == 2);
  const std::string why =
      "has records for line 1 (id \"job-0\") made from another text of that line";
  CHECK(resumed.err.find(why) != std::string::npos);
  CHECK(slurp(dir + "/r.jsonl") == records);
  // Refused before it changed anything: the side file is as it was ("complete", not "running"
  // or "failed"), so the finished output still merges.
  CHECK(slurp(dir + "/r.jsonl.loom.json") == side);
}

TEST_CASE("--resume of a run with failed jobs still exits 1 and says why") {
  const std::string dir = temp_dir("safety_failed");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 12, 2, true);  // 1 bad line
  CHECK(run(run_args(jobs, dir + "/r.jsonl", ""), dir).code == 1);
  Exit again = run("run" + kModel + " --jobs " + jobs + " --out " + dir + "/r.jsonl --resume", dir);
  CHECK(again.code == 1);
  CHECK(again.err.find("loom: warning: resume: 1 job failed in an earlier run of " + dir +
                       "/r.jsonl") != std::string::npos);
  // Every line counts as read (13: 12 jobs and the bad one), the bad one as failed earlier.
  CHECK(again.err.find("loom: done: 13/13 jobs read") != std::string::npos);
  CHECK(again.err.find("loom: 13 jobs (0 failed, 1 more in an earlier run)") != std::string::npos);
}

TEST_CASE("one dataset folder, one layout: shards never mix into an unsharded run's index") {
  const std::string dir = temp_dir("safety_merge_ds");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 6, 2);
  REQUIRE(run(run_args(jobs, dir + "/all.jsonl", "--tokens-out " + dir + "/ds"), dir).code == 0);
  const std::string index = slurp(dir + "/ds/dataset.json"),
                    manifest = slurp(dir + "/ds/manifest.jsonl");
  // A shard run into it is refused before anything is made.
  Exit e = run(run_args(jobs, dir + "/s.jsonl", "--tokens-out " + dir + "/ds --shard 0/2"), dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("holds the dataset of an unsharded run") != std::string::npos);
  CHECK(!fs::exists(dir + "/s.shard-0-of-2.jsonl"));
  // Shard files put there by hand: merge --dataset does not replace the index either.
  const std::string other = temp_dir("safety_merge_ds_shards");
  for (const char* k : {"0/2", "1/2"})
    REQUIRE(
        run(run_args(jobs, other + "/s.jsonl", "--tokens-out " + other + "/ds --shard " + k), other)
            .code == 0);
  for (const auto& de : fs::directory_iterator(other + "/ds"))
    if (de.path().filename().string().find(".shard-") != std::string::npos)
      fs::copy_file(de.path(), dir + "/ds/" + de.path().filename().string());
  // Other shard counts do not mix either.
  e = run(run_args(jobs, other + "/t.jsonl", "--tokens-out " + other + "/ds --shard 0/3"), other);
  CHECK(e.code == 2);
  CHECK(e.err.find("holds shards of 2") != std::string::npos);
  e = run("merge --dataset " + dir + "/ds", dir);
  CHECK(e.code == 2);
  CHECK(e.err.find(dir + "/ds/dataset.json is the index of an unsharded run (9 samples)") !=
        std::string::npos);
  CHECK(slurp(dir + "/ds/dataset.json") == index);
  CHECK(slurp(dir + "/ds/manifest.jsonl") == manifest);
}

TEST_CASE("merge refuses shards of two runs, unfinished shards, and replacing a file") {
  const std::string dir = temp_dir("safety_merge");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 6, 2);
  for (const char* k : {"0/2", "1/2"})
    REQUIRE(run(run_args(jobs, dir + "/s.jsonl", "--shard " + std::string(k)), dir).code == 0);
  const std::string s0 = dir + "/s.shard-0-of-2.jsonl", s1 = dir + "/s.shard-1-of-2.jsonl";
  REQUIRE(run("run -q --model " + kData + "/tiny_v2 --jobs " + jobs + " --shard 1/2 --out " + dir +
                  "/v2.jsonl",
              dir)
              .code == 0);
  const std::string v2 = dir + "/v2.shard-1-of-2.jsonl";

  Exit mixed = run("merge --jobs " + jobs + " --out " + dir + "/m.jsonl " + s0 + " " + v2, dir);
  CHECK(mixed.code == 2);
  CHECK(mixed.err.find("merge: " + v2 + " was made with ") != std::string::npos);
  CHECK(mixed.err.find("(their side files); expected the shards of one run") != std::string::npos);
  CHECK(!fs::exists(dir + "/m.jsonl"));

  // A stopped shard: its side file says so; --allow-partial merges it and exits 1.
  const std::string side = slurp(s1 + ".loom.json");
  json stopped = json::parse(side);
  stopped["state"] = "stopped";
  std::ofstream(s1 + ".loom.json") << stopped.dump();
  Exit unfinished = run("merge --out " + dir + "/m.jsonl " + s0 + " " + s1, dir);
  CHECK(unfinished.code == 2);
  CHECK(unfinished.err == "loom: error: merge: " + s1 + " is not finished (" + s1 +
                              ".loom.json says \"stopped\"); finish it with `loom run --resume`, "
                              "or pass --allow-partial\n");
  Exit partial = run("merge --allow-partial --out " + dir + "/m.jsonl " + s0 + " " + s1, dir);
  CHECK(partial.code == 1);
  CHECK(partial.err.find("partial merge: 1 input not finished (" + s1 + ": stopped)") !=
        std::string::npos);
  std::ofstream(s1 + ".loom.json") << side;

  const std::string merged = slurp(dir + "/m.jsonl");
  Exit exists = run("merge --out " + dir + "/m.jsonl " + s0 + " " + s1, dir);
  CHECK(exists.code == 2);
  CHECK(exists.err == "loom: error: merge: --out " + dir +
                          "/m.jsonl already exists; pass --overwrite to replace it, or choose a "
                          "new --out\n");
  CHECK(run("merge --overwrite --out " + dir + "/m.jsonl " + s0 + " " + s1, dir).code == 0);
  CHECK(tokens_by_sample(dir + "/m.jsonl").size() == 9);

  const std::string jobs_bytes = slurp(jobs);
  Exit onto_jobs =
      run("merge --overwrite --jobs " + jobs + " --out " + jobs + " " + s0 + " " + s1, dir);
  CHECK(onto_jobs.code == 2);
  CHECK(onto_jobs.err.find("is the jobs file") != std::string::npos);
  CHECK(slurp(jobs) == jobs_bytes);
  Exit report_onto = run("merge --reports " + s0 + " --out " + s1, dir);
  CHECK(report_onto.code == 2);
  CHECK(report_onto.err == "loom: error: merge: --out " + s1 + " is a loom run's results file (" +
                               s1 + ".loom.json beside it); choose another --out\n");
}

TEST_CASE("--shard auto that finds no launcher under an array says so") {
  const std::string dir = temp_dir("safety_auto");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 2, 2);
  Exit e = run(run_args(jobs, dir + "/r.jsonl", "--shard auto"), dir,
               {"SLURM_ARRAY_TASK_ID=2", "SLURM_ARRAY_TASK_COUNT=4"});
  CHECK(e.code == 0);
  CHECK(e.err.find("loom: warning: --shard auto found no srun/mpirun/torchrun rank, so this "
                   "process runs every job of the jobs file, though the environment shows "
                   "several tasks (SLURM_ARRAY_TASK_COUNT=4); for Slurm array tasks pass "
                   "--shard array") != std::string::npos);
}

TEST_CASE("calibrate and bench: an existing file only with --overwrite, never a run's results") {
  const std::string dir = temp_dir("safety_other_outputs");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 4, 2);
  REQUIRE(run(run_args(jobs, dir + "/r.jsonl", ""), dir).code == 0);
  const std::string records = slurp(dir + "/r.jsonl"), jobs_bytes = slurp(jobs);
  std::ofstream(dir + "/old.json") << "{}\n";
  const std::string cal = "calibrate --backend cpu" + kModel + " --jobs " + jobs + " --margin 3 ";
  const std::string bench =
      "bench --backend cpu" + kModel + " --frames 1 --context-frames 1 --json ";
  struct Case {
    std::string args, error;
  };
  for (const Case& c : std::vector<Case>{
           {cal + "--out " + dir + "/r.jsonl",
            "calibrate: --out " + dir + "/r.jsonl is a loom run's results file"},
           {cal + "--overwrite --out " + dir + "/r.jsonl", "is a loom run's results file"},
           {cal + "--overwrite --out " + jobs, "calibrate: --out " + jobs + " is also an input"},
           {cal + "--out " + dir + "/old.json",
            "calibrate: --out " + dir + "/old.json already exists; pass --overwrite"},
           {bench + dir + "/r.jsonl", "bench: --json " + dir + "/r.jsonl is a loom run's results"},
           {bench + dir + "/old.json", "bench: --json " + dir + "/old.json already exists"}}) {
    Exit e = run(c.args, dir);
    CHECK(e.code == 2);
    CHECK_MESSAGE(e.err.find(c.error) != std::string::npos, e.err, " lacks: ", c.error);
  }
  CHECK(slurp(dir + "/r.jsonl") == records);
  CHECK(slurp(jobs) == jobs_bytes);
  CHECK(slurp(dir + "/old.json") == "{}\n");

  // --overwrite replaces; "-" is stdout; a new path's folders are made.
  CHECK(run(cal + "--overwrite --out " + dir + "/old.json", dir).code == 0);
  CHECK(json::parse(slurp(dir + "/old.json")).contains("k"));
  CHECK(std::system(
            (kLoom + " " + cal + "--out - > " + dir + "/stdout.json 2>/dev/null").c_str()) == 0);
  CHECK(json::parse(slurp(dir + "/stdout.json")).contains("v"));
  CHECK(run(bench + dir + "/new/b.json", dir).code == 0);
  CHECK(json::parse(slurp(dir + "/new/b.json")).contains("latency"));
}

TEST_CASE("a jobs file truncated under the run is a fatal error, not a bad line") {
  const std::string dir = temp_dir("safety_truncated");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 400, 8);
  Spawned s = spawn(run_args(jobs, dir + "/r.jsonl", "--max-seqs 2"), dir + "/run.err");
  wait_until_holds(dir + "/r.jsonl", "");
  std::ofstream(jobs, std::ios::trunc).close();
  Exit e = wait_for(s);
  CHECK(e.code == 2);
  CHECK(e.err.find("loom: error: the jobs file " + jobs + " shrank while it was read") !=
        std::string::npos);
  for (const json& r : read_lines(dir + "/r.jsonl")) CHECK(r["status"] == "ok");
  CHECK(json::parse(slurp(dir + "/r.jsonl.loom.json"))["state"] == "failed");
}

TEST_CASE("a shard's first sample into a merged folder removes the stale index, not before") {
  const std::string dir = temp_dir("safety_stale_index");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 6, 2);
  const std::string shard =
      "run" + kModel + " --out " + dir + "/s.jsonl --tokens-out " + dir + "/ds --shard ";
  for (const char* k : {"0/2", "1/2"})
    REQUIRE(run(shard + k + " -q --jobs " + jobs, dir).code == 0);
  REQUIRE(run("merge --dataset " + dir + "/ds", dir).code == 0);
  const std::string index = slurp(dir + "/ds/dataset.json");
  // Nothing to do, or refused as it reads its jobs (a shorter file): the index stays.
  CHECK(run(shard + "1/2 --resume --jobs " + jobs, dir).code == 0);
  const std::string shorter = make_tiny_v1_jobs(dir + "/shorter.jsonl", 2, 2);
  CHECK(run(shard + "1/2 --resume --jobs " + shorter, dir).code == 2);
  CHECK(slurp(dir + "/ds/dataset.json") == index);
  // New samples (jobs appended): the index goes before the first of them.
  const std::string more = make_tiny_v1_jobs(dir + "/more.jsonl", 8, 2);
  Exit again = run(shard + "1/2 --resume --jobs " + more, dir);
  CHECK(again.code == 0);
  CHECK(again.err.find("removed " + dir + "/ds's merged index") != std::string::npos);
  CHECK(!fs::exists(dir + "/ds/manifest.jsonl"));
  CHECK(!fs::exists(dir + "/ds/dataset.json"));
  // Shard 0 read 6 lines, shard 1 8 (jobs_read): not one run until shard 0 reads them too.
  CHECK(run("merge --dataset " + dir + "/ds", dir).code == 2);
  CHECK(run(shard + "0/2 -q --resume --jobs " + more, dir).code == 0);
  CHECK(run("merge --dataset " + dir + "/ds", dir).code == 0);
  CHECK(read_lines(dir + "/ds/manifest.jsonl").size() == 9 + 1 + 2);  // + jobs 6 and 7
}

TEST_CASE("--resume refuses a checkpoint whose weights changed in place") {
  const std::string dir = temp_dir("safety_weights");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 4, 2);
  fs::copy(kData + "/tiny_v1", dir + "/ck", fs::copy_options::recursive);
  const std::string args =
      "run -q --model " + dir + "/ck --jobs " + jobs + " --out " + dir + "/r.jsonl --resume";
  REQUIRE(run(args, dir).code == 0);
  // An older loom's side file has no weights_sample: it resumes as before.
  const std::string side = slurp(dir + "/r.jsonl.loom.json");
  json old_side = json::parse(side);
  REQUIRE(old_side["identity"].contains("weights_sample"));
  old_side["identity"].erase("weights_sample");
  old_side["schema"] = 1;
  std::ofstream(dir + "/r.jsonl.loom.json") << old_side.dump();
  CHECK(run(args, dir).code == 0);
  std::ofstream(dir + "/r.jsonl.loom.json") << side;

  // The last byte of a weight file (the end of a tensor) changed, its size and shapes kept.
  std::string weights;
  for (const auto& de : fs::directory_iterator(dir + "/ck"))
    if (de.path().extension() == ".safetensors") weights = de.path().string();
  std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-1, std::ios::end);
  const char last = char(f.get());
  f.seekp(-1, std::ios::end);
  f.put(char(last ^ 0x01));
  f.close();
  Exit changed = run(args, dir);
  CHECK(changed.code == 2);
  CHECK(changed.err.find("was made with weights_sample = ") != std::string::npos);
}

TEST_CASE("results of loom 0.5.0 resume and merge: keys it did not record are not compared") {
  const std::string dir = temp_dir("safety_schema1");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 4, 2);
  fs::create_directories(dir + "/real");
  fs::create_directory_symlink(dir + "/real", dir + "/link");
  const std::string shard =
      run_args(jobs, dir + "/link/r.jsonl", "--seed 7 --tokens-out " + dir + "/link/ds --shard ");
  for (const char* k : {"0/2", "1/2"}) REQUIRE(run(shard + k, dir).code == 0);
  // As 0.5.0 wrote shard 0's side file: schema 1, no weights_sample or seed, the folder as typed.
  const std::string side0 = dir + "/real/r.shard-0-of-2.jsonl.loom.json";
  json old = json::parse(slurp(side0));
  old["schema"] = 1;
  old["identity"].erase("weights_sample");
  old["identity"].erase("seed");
  old["identity"]["tokens_out"] = dir + "/link/ds";
  std::ofstream(side0) << old.dump();
  CHECK(run("merge --jobs " + jobs + " --out " + dir + "/all.jsonl " + dir +
                "/real/r.shard-0-of-2.jsonl " + dir + "/real/r.shard-1-of-2.jsonl",
            dir)
            .code == 0);
  CHECK(run(shard + "0/2 --resume", dir).code == 0);
  // A 0.5.0 report has no "results": its "out" as typed, from another folder, still matches.
  const std::string rep = dir + "/real/rep.json";
  REQUIRE(run(run_args(jobs, dir + "/real/r2.jsonl", "--report " + rep), dir).code == 0);
  json report = json::parse(slurp(rep));
  report.erase("results");
  report["out"] = "real/r2.jsonl";
  std::ofstream(rep) << report.dump();
  CHECK(run(run_args(jobs, dir + "/real/r2.jsonl", "--resume --report " + rep), dir).code == 0);
}

TEST_CASE("merge --dataset holds the shards' locks; a running shard is refused or left out") {
  const std::string dir = temp_dir("safety_merge_lock");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 4, 2);
  const std::string shard =
      run_args(jobs, dir + "/s.jsonl", "--tokens-out " + dir + "/ds --shard ");
  REQUIRE(run(shard + "0/2", dir).code == 0);
  const std::string big = make_tiny_v1_jobs(dir + "/big.jsonl", 400, 8);
  Spawned s1 =
      spawn(run_args(big, dir + "/s.jsonl", "--max-seqs 2 --tokens-out " + dir + "/ds --shard 1/2"),
            dir + "/s1.err");
  wait_until_holds(dir + "/ds/dataset.shard-1-of-2.json", "running");  // locked, and listed
  Exit busy = run("merge --dataset " + dir + "/ds", dir);
  Exit partial = run("merge --allow-partial --dataset " + dir + "/ds", dir);
  kill(s1.pid, SIGKILL);
  wait_for(s1);
  CHECK(busy.code == 2);
  CHECK(busy.err.find("shard 1/2 is being written by another loom run") != std::string::npos);
  CHECK(partial.code == 1);
  const json index = json::parse(slurp(dir + "/ds/dataset.json"));
  CHECK(index["state"] == "partial");
  CHECK(index["shard"]["unfinished"] == json::array({1}));
  CHECK(read_lines(dir + "/ds/manifest.jsonl").size() == 2);  // shard 0: jobs 0 and 2
}

TEST_CASE("a jobs file rewritten in place under the run is a fatal error; appended lines run") {
  const std::string dir = temp_dir("safety_rewritten");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 400, 8);
  const std::string other = make_tiny_v1_jobs(dir + "/other.jsonl", 500, 3);
  Spawned s = spawn(run_args(jobs, dir + "/r.jsonl", "--max-seqs 2"), dir + "/run.err");
  wait_until_holds(dir + "/r.jsonl", "");
  std::string text = slurp(other);
  text[9] = 'X';                                 // "job-0" → another id: the first bytes differ
  std::ofstream(jobs, std::ios::trunc) << text;  // longer than before, same inode
  Exit e = wait_for(s);
  CHECK(e.code == 2);
  // Seen as it shrank (between the truncation and the write) or as rewritten (after).
  const std::string said = "loom: error: the jobs file " + jobs;
  CHECK((e.err.find(said + " was rewritten while it was read") != std::string::npos ||
         e.err.find(said + " shrank while it was read") != std::string::npos));

  // Lines appended to a jobs file are jobs of the run.
  const std::string grow = make_tiny_v1_jobs(dir + "/grow.jsonl", 40, 8);
  Spawned g = spawn(run_args(grow, dir + "/g.jsonl", "--max-seqs 1"), dir + "/grow.err");
  wait_until_holds(dir + "/g.jsonl", "");
  std::ifstream more(make_tiny_v1_jobs(dir + "/more.jsonl", 45, 8));
  std::string line;
  std::ofstream app(grow, std::ios::app);
  for (int i = 0; std::getline(more, line); ++i)
    if (i >= 40) app << line << "\n";
  app.close();
  CHECK(wait_for(g).code == 0);
  CHECK(tokens_by_sample(dir + "/g.jsonl").size() == 67);  // 45 jobs, 1 + i % 2 samples each
}

TEST_CASE("a last jobs line still being written gets no record; --resume runs it once whole") {
  const std::string dir = temp_dir("safety_cut_line");
  const std::string full = make_tiny_v1_jobs(dir + "/full.jsonl", 3, 2);
  const std::string text = slurp(full);
  const size_t second_end = text.find('\n', text.find('\n') + 1);
  const std::string jobs = dir + "/jobs.jsonl";
  std::ofstream(jobs) << text.substr(0, second_end + 1 + 100);  // two lines and a third's head
  Exit cut = run(run_args(jobs, dir + "/r.jsonl", "--report " + dir + "/rep.json"), dir);
  CHECK(cut.code == 1);
  CHECK(json::parse(slurp(dir + "/rep.json"))["jobs_summary"]["last_line_unrun"] == 3);
  CHECK(cut.err.find("loom: warning: line 3 of " + jobs +
                     ", the last, has no newline and is no valid job (still being written?)") !=
        std::string::npos);
  CHECK(tokens_by_sample(dir + "/r.jsonl").size() == 3);  // job-0 (1 sample), job-1 (2)
  for (const json& r : read_lines(dir + "/r.jsonl")) CHECK(r["line"] != 3);
  std::ofstream(jobs, std::ios::app) << text.substr(second_end + 1 + 100);
  CHECK(run(run_args(jobs, dir + "/r.jsonl", "--resume --report " + dir + "/rep.json"), dir).code ==
        0);
  CHECK(tokens_by_sample(dir + "/r.jsonl").size() == 4);
  CHECK(!json::parse(slurp(dir + "/rep.json"))["jobs_summary"].contains("last_line_unrun"));
}

TEST_CASE("an --out that is a symlink keeps its side file and lock at the target") {
  const std::string dir = temp_dir("safety_out_link");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 2, 2);
  fs::create_symlink("real.jsonl", dir + "/link.jsonl");
  REQUIRE(run(run_args(jobs, dir + "/link.jsonl", ""), dir).code == 0);
  CHECK(fs::exists(dir + "/real.jsonl.loom.json"));
  CHECK(!fs::exists(dir + "/link.jsonl.loom.json"));
  const std::string records = slurp(dir + "/real.jsonl");
  Exit onto =
      run(run_args(jobs, dir + "/b.jsonl", "--overwrite --report " + dir + "/real.jsonl"), dir);
  CHECK(onto.code == 2);
  CHECK(onto.err.find("is a loom run's results file") != std::string::npos);
  CHECK(slurp(dir + "/real.jsonl") == records);
  CHECK(run(run_args(jobs, dir + "/link.jsonl", "--resume"), dir).code == 0);
  CHECK(run(run_args(jobs, dir + "/real.jsonl", "--resume"), dir).code == 0);
  CHECK(slurp(dir + "/real.jsonl") == records);
}

TEST_CASE("--overwrite refused after the model loads keeps the old output; a killed one says so") {
  const std::string dir = temp_dir("safety_replace");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 8, 2);
  const std::string outs =
      " --tokens-out " + dir + "/out/ds --report " + dir + "/out/rep.json --samples-per-file 2";
  REQUIRE(run(run_args(jobs, dir + "/out/r.jsonl", outs), dir).code == 0);
  const auto before = tree(dir + "/out");
  const auto tokens = tokens_by_sample(dir + "/out/r.jsonl");
  // A KV pool no host can allocate: refused once the model is loaded, before any step.
  Exit e =
      run(run_args(jobs, dir + "/out/r.jsonl", outs + " --overwrite --kv-blocks 2147483647"), dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("out of host memory") != std::string::npos);
  CHECK(tree(dir + "/out") == before);  // results, side file, report, every dataset file

  // Killed as it starts removing the old output: its side file and dataset.json say
  // "replacing", so a --resume (which would mix the old samples with the new options), a merge
  // or verify does not take the old files for a finished dataset.
  e = run(run_args(jobs, dir + "/out/r.jsonl", outs + " --overwrite"), dir,
          {"LOOM_TEST_FAULT=replacing:1"});
  REQUIRE(e.signal == SIGKILL);
  CHECK(json::parse(slurp(dir + "/out/r.jsonl.loom.json"))["state"] == "replacing");
  CHECK(json::parse(slurp(dir + "/out/ds/dataset.json"))["state"] == "replacing");
  const Verified replacing = verify_dataset(dir + "/out/ds", dir);
  CHECK(replacing.code == 1);
  e = run(run_args(jobs, dir + "/out/r.jsonl", outs + " --resume"), dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("was stopped while it removed the old output") != std::string::npos);
  CHECK(e.err.find("run it again with --overwrite to finish it") != std::string::npos);
  REQUIRE(run(run_args(jobs, dir + "/out/r.jsonl", outs + " --overwrite"), dir).code == 0);
  CHECK(tokens_by_sample(dir + "/out/r.jsonl") == tokens);  // made again, the same
  CHECK(verify_dataset(dir + "/out/ds", dir).code == 0);

  // A first --resume refused after the load leaves nothing either (no empty index files).
  e = run(run_args(jobs, dir + "/new/a/r.jsonl",
                   "--tokens-out " + dir + "/new/a/ds --resume --kv-blocks 2147483647"),
          dir);
  CHECK(e.code == 2);
  CHECK(!fs::exists(dir + "/new"));
}

TEST_CASE("a folder holding results, report and dataset moves and resumes") {
  const std::string dir = temp_dir("safety_move");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 10, 2);
  auto outs = [&](const std::string& at) {
    return " --tokens-out " + at + "/ds --report " + at + "/rep.json --samples-per-file 2";
  };
  REQUIRE(run(run_args(jobs, dir + "/whole/r.jsonl", outs(dir + "/whole")), dir).code == 0);
  const auto whole = tokens_by_sample(dir + "/whole/r.jsonl");
  // Stopped at its 5th record (scratch purged, say), moved, and resumed where it now is.
  Exit e = run(run_args(jobs, dir + "/a/out/r.jsonl", outs(dir + "/a/out")), dir,
               {"LOOM_TEST_FAULT=record:5"});
  REQUIRE(e.signal == SIGKILL);
  fs::rename(dir + "/a", dir + "/b");
  e = run(run_args(jobs, dir + "/b/out/r.jsonl", outs(dir + "/b/out") + " --resume"), dir);
  CHECK_MESSAGE(e.code == 0, e.err);
  CHECK(tokens_by_sample(dir + "/b/out/r.jsonl") == whole);
  CHECK(verify_dataset(dir + "/b/out/ds", dir).code == 0);
  // Moved apart, they are other files: the dataset's records are not this --out's.
  fs::create_directories(dir + "/c");
  fs::rename(dir + "/b/out/ds", dir + "/c/ds");
  e = run(run_args(jobs, dir + "/b/out/r.jsonl",
                   " --tokens-out " + dir + "/c/ds --samples-per-file 2 --resume"),
          dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("holds the samples of the results file " + dir + "/c/r.jsonl") !=
        std::string::npos);
  fs::rename(dir + "/c/ds", dir + "/b/out/ds");
  // A copy's dataset is the copy's: the original's run may not take it, nor its report.
  fs::copy(dir + "/b", dir + "/d", fs::copy_options::recursive);
  e = run(run_args(jobs, dir + "/b/out/r.jsonl",
                   " --tokens-out " + dir + "/d/out/ds --samples-per-file 2 --overwrite"),
          dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("holds the samples of the results file " + dir + "/d/out/r.jsonl") !=
        std::string::npos);
  e = run(run_args(jobs, dir + "/b/out/r.jsonl",
                   " --tokens-out " + dir + "/b/out/ds --samples-per-file 2 --report " + dir +
                       "/d/out/rep.json --resume"),
          dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("is the report of the results file") != std::string::npos);
  CHECK(verify_dataset(dir + "/d/out/ds", dir).code == 0);
}

// Results replaced by an --overwrite that writes another --tokens-out (or none) would leave the
// old dataset naming records that are gone: refused. Results deleted by hand leave it so all
// the same: another --out may --overwrite it (no --resume: nothing to continue).
TEST_CASE("a dataset whose results file is gone can be overwritten; replacing them is refused") {
  const std::string dir = temp_dir("safety_orphan");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 4, 2);
  REQUIRE(run(run_args(jobs, dir + "/r.jsonl", "--tokens-out " + dir + "/ds1"), dir).code == 0);
  const std::string records = slurp(dir + "/r.jsonl");
  for (const std::string& other : {" --tokens-out " + dir + "/ds2", std::string()}) {
    Exit e = run(run_args(jobs, dir + "/r.jsonl", "--overwrite" + other), dir);
    CHECK(e.code == 2);
    CHECK(e.err.find("--overwrite: --out " + dir + "/r.jsonl was written with --tokens-out " + dir +
                     "/ds1, whose shard 0/1") != std::string::npos);
    CHECK(slurp(dir + "/r.jsonl") == records);
    CHECK(!fs::exists(dir + "/ds2"));
  }
  fs::remove(dir + "/r.jsonl");
  fs::remove(dir + "/r.jsonl.loom.json");
  Exit e = run(run_args(jobs, dir + "/r2.jsonl", "--tokens-out " + dir + "/ds1 --resume"), dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("that file's records are gone (replaced, or of another --tokens-out), so "
                   "--resume cannot continue them") != std::string::npos);
  e = run(run_args(jobs, dir + "/r2.jsonl", "--tokens-out " + dir + "/ds1 --overwrite"), dir);
  CHECK_MESSAGE(e.code == 0, e.err);
  CHECK(slurp(dir + "/ds1/dataset.json").find(dir + "/r2.jsonl") != std::string::npos);
  CHECK(verify_dataset(dir + "/ds1", dir).code == 0);
}

TEST_CASE("merge --dataset refuses shards that store different things") {
  const std::string dir = temp_dir("safety_merge_form");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 6, 2);
  REQUIRE(
      run(run_args(jobs, dir + "/s.jsonl", "--tokens-out " + dir + "/ds --shard 0/2"), dir).code ==
      0);
  REQUIRE(run(run_args(jobs, dir + "/s.jsonl",
                       "--tokens-out " + dir + "/ds --shard 1/2 --no-dataset-actions"),
              dir)
              .code == 0);
  Exit e = run("merge --dataset " + dir + "/ds", dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("has stores {\"actions\":false,\"context\":true}") != std::string::npos);
  CHECK(!fs::exists(dir + "/ds/dataset.json"));
}
