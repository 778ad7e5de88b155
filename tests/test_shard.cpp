// Sharding (lib/io/shard.h): a shard comes only from --shard K/N, auto (a launcher's ranks)
// or array (the Slurm array task); without --shard every job runs, whatever the environment,
// and a warning names the variables that showed several tasks. The sbatch script and the
// one-jobs-file-per-array-task layouts, which a guess would cut to 1/N, are the cases that
// matter most. Then the loom binary end to end under an array task's environment.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/shard.h"

using namespace loom;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup lookup(const Vars& vars) {
  return [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

Shard resolve(const std::string& flag, const Vars& vars) {
  return resolve_shard(flag, lookup(vars));
}

std::string warning(const Vars& vars) {
  return unrequested_shard_warning(lookup(vars));
}

bool same(const Shard& s, int index, int count, const std::string& source) {
  return s.index == index && s.count == count && s.source == source;
}

std::string malformed(const std::string& name, const std::string& value) {
  return "environment variable " + name + "=" + value +
         ": expected a non-negative integer, found something else; unset it or fix the launcher";
}

// What a plain `loom run` sees in an `sbatch --ntasks=4` script: the allocation's task count
// and a SLURM_PROCID of 0, but no srun step.
const Vars kSbatch = {{"SLURM_JOB_ID", "77"}, {"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}};

// Task 3 of `sbatch --array=0-7`, each task with its own jobs file.
const Vars kArrayTask = {{"SLURM_ARRAY_TASK_ID", "3"},  {"SLURM_ARRAY_TASK_COUNT", "8"},
                         {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_STEP", "1"},
                         {"SLURM_PROCID", "0"},         {"SLURM_NTASKS", "1"}};

const char* const kHowTo =
    "); to split one jobs file between them pass --shard auto (srun/mpirun/torchrun ranks), "
    "--shard array (Slurm array tasks) or --shard K/N";

}  // namespace

TEST_SUITE("shard") {
  TEST_CASE("parse_shard: K/N, and clear errors for everything else") {
    Shard s = parse_shard("2/5");
    CHECK(same(s, 2, 5, "--shard"));
    CHECK(parse_shard("0/1").count == 1);
    for (const char* bad : {"5/5", "1/0", "-1/2", "a/2", "1/2/3", "12", "/3", "1/", " 1/2",
                            "1/99999999999", "Auto", "arrays"}) {
      CAPTURE(bad);
      const std::string message = "--shard " + std::string(bad) +
                                  ": expected K/N with whole numbers 0 <= K < N (e.g. 0/4 ... "
                                  "3/4), auto or array";
      CHECK_THROWS_WITH_AS(parse_shard(bad), message.c_str(), loom::Error);
      CHECK_THROWS_WITH_AS(resolve(bad, {}), message.c_str(), loom::Error);
    }
  }

  TEST_CASE("no --shard: every job, whatever the environment, even a malformed one") {
    const Vars everything = {{"SLURM_STEP_ID", "0"},
                             {"SLURM_STEP_NUM_TASKS", "4"},
                             {"SLURM_PROCID", "3"},
                             {"SLURM_NTASKS", "4"},
                             {"SLURM_ARRAY_TASK_ID", "5"},
                             {"SLURM_ARRAY_TASK_COUNT", "8"},
                             {"OMPI_COMM_WORLD_RANK", "1"},
                             {"OMPI_COMM_WORLD_SIZE", "2"},
                             {"PMI_RANK", "x"},
                             {"RANK", "-1"}};
    for (const Vars& vars : {Vars{}, kSbatch, kArrayTask, everything}) {
      CHECK(same(resolve("", vars), 0, 1, "no --shard"));
    }
    // K/N is taken as given, never combined with the environment.
    CHECK(same(resolve("2/5", everything), 2, 5, "--shard"));
  }

  TEST_CASE("auto: each launcher's ranks") {
    CHECK(same(resolve("auto", {}), 0, 1, "--shard auto: no launcher found"));

    // srun -n 4: the step's task count, not the allocation's (sbatch -n 8, srun -n 4).
    CHECK(same(resolve("auto", {{"SLURM_STEP_ID", "0"},
                                {"SLURM_STEP_NUM_TASKS", "4"},
                                {"SLURM_PROCID", "3"},
                                {"SLURM_NTASKS", "8"}}),
               3, 4, "SLURM_PROCID/SLURM_STEP_NUM_TASKS"));
    // srun --mpi=pmix: PMIX_RANK agrees with SLURM_PROCID.
    CHECK(same(resolve("auto", {{"SLURM_STEP_ID", "2"},
                                {"SLURM_STEP_NUM_TASKS", "2"},
                                {"SLURM_PROCID", "1"},
                                {"PMIX_RANK", "1"}}),
               1, 2, "SLURM_PROCID/SLURM_STEP_NUM_TASKS"));

    CHECK(same(resolve("auto", {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}), 1,
               2, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"));
    CHECK(same(resolve("auto", {{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}}), 2, 3, "PMI_RANK/PMI_SIZE"));
    CHECK(same(resolve("auto", {{"RANK", "5"}, {"WORLD_SIZE", "8"}}), 5, 8, "RANK/WORLD_SIZE"));
    // A launcher of one process is found, and says 0/1.
    CHECK(same(resolve("auto", {{"RANK", "0"}, {"WORLD_SIZE", "1"}}), 0, 1, "RANK/WORLD_SIZE"));

    // The innermost launcher wins: under srun, torchrun's and mpirun's processes carry the
    // step's variables too, where SLURM_PROCID numbers the launchers (one per node).
    const Vars step = {
        {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}};
    Vars torchrun = step, mpirun = step, hydra = step;
    torchrun.insert({{"RANK", "6"}, {"WORLD_SIZE", "8"}});
    mpirun.insert(
        {{"OMPI_COMM_WORLD_RANK", "7"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"PMIX_RANK", "7"}});
    hydra.insert({{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}});
    CHECK(same(resolve("auto", torchrun), 6, 8, "RANK/WORLD_SIZE"));
    CHECK(same(resolve("auto", mpirun), 7, 8, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"));
    CHECK(same(resolve("auto", hydra), 5, 8, "PMI_RANK/PMI_SIZE"));

    // PMIx keeps the size in its server; alone, or disagreeing with the step, it is refused.
    CHECK_THROWS_WITH_AS(resolve("auto", {{"PMIX_RANK", "3"}}),
                         "PMIX_RANK=3 but no process count: PMIx keeps the job size in its server "
                         "(PMIX_JOB_SIZE), not in the environment; expected srun, mpirun, "
                         "PMI_SIZE or WORLD_SIZE beside it, found none; pass --shard K/N",
                         loom::Error);
    Vars prterun = step;
    prterun["PMIX_RANK"] = "5";
    CHECK_THROWS_WITH_AS(resolve("auto", prterun),
                         "PMIX_RANK=5 but SLURM_PROCID=1: expected the same rank (srun "
                         "--mpi=pmix), found a PMIx launcher inside an srun step; pass --shard K/N",
                         loom::Error);
  }

  TEST_CASE("auto: a batch script is no srun step, whatever it says") {
    // Released Slurm leaves SLURM_STEP_ID unset in the batch script; newer Slurm writes the
    // batch step's id 0xfffffffb with %d; tools name the special steps.
    for (const char* id : {"", "-5", "-6", "batch", "extern", "interactive", "4294967291",
                           "4294967292", "4294967280"}) {
      CAPTURE(id);
      Vars vars = kSbatch;
      if (*id) vars["SLURM_STEP_ID"] = id;
      CHECK(same(resolve("auto", vars), 0, 1, "--shard auto: no launcher found"));
      CHECK(same(resolve("", vars), 0, 1, "no --shard"));
      CHECK(warning(vars) ==
            std::string("no --shard, so this process runs every job of the jobs file, though "
                        "the environment shows several tasks (SLURM_NTASKS=4") +
                kHowTo);
    }
    // The last regular step number is still a step.
    CHECK(same(resolve("auto", {{"SLURM_STEP_ID", "4294967279"},
                                {"SLURM_STEP_NUM_TASKS", "2"},
                                {"SLURM_PROCID", "1"}}),
               1, 2, "SLURM_PROCID/SLURM_STEP_NUM_TASKS"));
    for (const char* id : {"x", "4294967296", "0x10", "--5", "1 "}) {
      CAPTURE(id);
      Vars vars = kSbatch;
      vars["SLURM_STEP_ID"] = id;
      CHECK_THROWS_WITH_AS(resolve("auto", vars),
                           ("environment variable SLURM_STEP_ID=" + std::string(id) +
                            ": expected a step number (or batch, extern, interactive), found "
                            "something else; unset it or fix the launcher")
                               .c_str(),
                           loom::Error);
    }
  }

  TEST_CASE("array: one jobs file per task runs whole; --shard array splits a shared one") {
    CHECK(same(resolve("", kArrayTask), 0, 1, "no --shard"));
    CHECK(warning(kArrayTask) ==
          std::string("no --shard, so this process runs every job of the jobs file, though the "
                      "environment shows several tasks (SLURM_ARRAY_TASK_COUNT=8") +
              kHowTo);
    // auto reads launchers, not arrays: an array task is one process.
    CHECK(same(resolve("auto", kArrayTask), 0, 1, "--shard auto: no launcher found"));
    CHECK(same(resolve("array", kArrayTask), 3, 8, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"));

    // --array=5-8: ids from SLURM_ARRAY_TASK_MIN; a missing STEP is 1, a missing MIN 0.
    CHECK(same(resolve("array", {{"SLURM_ARRAY_TASK_ID", "7"},
                                 {"SLURM_ARRAY_TASK_COUNT", "4"},
                                 {"SLURM_ARRAY_TASK_MIN", "5"}}),
               2, 4, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"));
    CHECK(same(resolve("array", {{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "3"}}), 2,
               3, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"));
    // --array=10-16:3 → ids 10, 13, 16.
    for (auto [id, index] : {std::pair{"10", 0}, {"13", 1}, {"16", 2}}) {
      CAPTURE(id);
      CHECK(resolve("array", {{"SLURM_ARRAY_TASK_ID", id},
                              {"SLURM_ARRAY_TASK_COUNT", "3"},
                              {"SLURM_ARRAY_TASK_MIN", "10"},
                              {"SLURM_ARRAY_TASK_STEP", "3"}})
                .index == index);
    }
    CHECK_THROWS_WITH_AS(
        resolve("array", {{"SLURM_ARRAY_TASK_ID", "3"},
                          {"SLURM_ARRAY_TASK_COUNT", "2"},
                          {"SLURM_ARRAY_TASK_MIN", "1"},
                          {"SLURM_ARRAY_TASK_STEP", "3"}}),
        "SLURM_ARRAY_TASK_ID=3: expected SLURM_ARRAY_TASK_MIN (1) + a multiple of "
        "SLURM_ARRAY_TASK_STEP (3), found 3; loom shards need a regular --array=A-B[:S]",
        loom::Error);
    CHECK_THROWS_WITH_AS(
        resolve("array", {{"SLURM_ARRAY_TASK_ID", "2"},
                          {"SLURM_ARRAY_TASK_COUNT", "2"},
                          {"SLURM_ARRAY_TASK_MIN", "4"}}),
        "SLURM_ARRAY_TASK_ID=2: expected SLURM_ARRAY_TASK_MIN (4) + a multiple of "
        "SLURM_ARRAY_TASK_STEP (1), found 2; loom shards need a regular --array=A-B[:S]",
        loom::Error);
    CHECK_THROWS_WITH_AS(
        resolve("array", {{"SLURM_ARRAY_TASK_ID", "8"}, {"SLURM_ARRAY_TASK_COUNT", "8"}}),
        "shard from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT: expected 0 <= K < N, found K = 8, "
        "N = 8",
        loom::Error);

    // Not in an array: an error, not a silent 0/1. An srun step is no array either.
    for (const Vars& vars :
         {Vars{}, kSbatch,
          Vars{{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}}}) {
      CHECK_THROWS_WITH_AS(resolve("array", vars),
                           "--shard array: expected SLURM_ARRAY_TASK_ID and "
                           "SLURM_ARRAY_TASK_COUNT (a Slurm job array, sbatch --array=A-B[:S]), "
                           "found neither",
                           loom::Error);
    }
    CHECK_THROWS_WITH_AS(resolve("array", {{"SLURM_ARRAY_TASK_ID", "3"}}),
                         "SLURM_ARRAY_TASK_ID=3 but SLURM_ARRAY_TASK_COUNT is not set: expected "
                         "both, found one",
                         loom::Error);
    CHECK_THROWS_WITH_AS(resolve("array", {{"SLURM_ARRAY_TASK_COUNT", "8"}}),
                         "SLURM_ARRAY_TASK_COUNT=8 but SLURM_ARRAY_TASK_ID is not set: expected "
                         "both, found one",
                         loom::Error);
  }

  TEST_CASE("every malformed value is an error naming its variable") {
    const Vars srun = {
        {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "1"}};
    const Vars array = {{"SLURM_ARRAY_TASK_ID", "1"},
                        {"SLURM_ARRAY_TASK_COUNT", "4"},
                        {"SLURM_ARRAY_TASK_MIN", "0"},
                        {"SLURM_ARRAY_TASK_STEP", "1"}};
    struct Case {
      std::string flag;
      Vars base;
      std::string name;
    };
    const std::vector<Case> cases = {
        {"auto", {{"RANK", "1"}, {"WORLD_SIZE", "4"}}, "RANK"},
        {"auto", {{"RANK", "1"}, {"WORLD_SIZE", "4"}}, "WORLD_SIZE"},
        {"auto",
         {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}},
         "OMPI_COMM_WORLD_RANK"},
        {"auto",
         {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}},
         "OMPI_COMM_WORLD_SIZE"},
        {"auto", {{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}}, "PMI_RANK"},
        {"auto", {{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}}, "PMI_SIZE"},
        {"auto", srun, "SLURM_PROCID"},
        {"auto", srun, "SLURM_STEP_NUM_TASKS"},
        {"auto", {{"PMIX_RANK", "1"}}, "PMIX_RANK"},
        {"array", array, "SLURM_ARRAY_TASK_ID"},
        {"array", array, "SLURM_ARRAY_TASK_COUNT"},
        {"array", array, "SLURM_ARRAY_TASK_MIN"},
        {"array", array, "SLURM_ARRAY_TASK_STEP"},
    };
    for (const Case& c : cases) {
      for (const char* bad : {"x", "-1", "1.5", " 2", "2x", "99999999999", "+3"}) {
        CAPTURE(c.name);
        CAPTURE(bad);
        Vars vars = c.base;
        vars[c.name] = bad;
        CHECK_THROWS_WITH_AS(resolve(c.flag, vars), malformed(c.name, bad).c_str(), loom::Error);
        CHECK_NOTHROW(warning(vars));  // the warning never fails a run
      }
    }
  }

  TEST_CASE("auto: a rank without its size, a size without its rank, a rank past the size") {
    const char* pairs[][2] = {{"RANK", "WORLD_SIZE"},
                              {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                              {"PMI_RANK", "PMI_SIZE"}};
    for (auto& [rank, size] : pairs) {
      CAPTURE(rank);
      CHECK_THROWS_WITH_AS(
          resolve("auto", {{rank, "1"}}),
          (std::string(rank) + "=1 but " + size + " is not set: expected both, found one").c_str(),
          loom::Error);
      CHECK_THROWS_WITH_AS(
          resolve("auto", {{size, "4"}}),
          (std::string(size) + "=4 but " + rank + " is not set: expected both, found one").c_str(),
          loom::Error);
      CHECK_THROWS_WITH_AS(resolve("auto", {{rank, "4"}, {size, "4"}}),
                           ("shard from " + std::string(rank) + "/" + size +
                            ": expected 0 <= K < N, found K = 4, N = 4")
                               .c_str(),
                           loom::Error);
      CHECK_THROWS_WITH_AS(resolve("auto", {{rank, "0"}, {size, "0"}}),
                           ("shard from " + std::string(rank) + "/" + size +
                            ": expected 0 <= K < N, found K = 0, N = 0")
                               .c_str(),
                           loom::Error);
    }
    CHECK_THROWS_WITH_AS(resolve("auto", {{"SLURM_STEP_ID", "0"}}),
                         "SLURM_STEP_ID=0 but SLURM_PROCID and SLURM_STEP_NUM_TASKS are not set: "
                         "expected both (srun sets them), found neither",
                         loom::Error);
    CHECK_THROWS_WITH_AS(resolve("auto", {{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}}),
                         "SLURM_PROCID=1 but SLURM_STEP_NUM_TASKS is not set: expected both, "
                         "found one",
                         loom::Error);
    CHECK_THROWS_WITH_AS(resolve("auto", {{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}}),
                         "SLURM_STEP_NUM_TASKS=2 but SLURM_PROCID is not set: expected both, "
                         "found one",
                         loom::Error);
    CHECK_THROWS_WITH_AS(
        resolve("auto",
                {{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "2"}}),
        "shard from SLURM_PROCID/SLURM_STEP_NUM_TASKS: expected 0 <= K < N, "
        "found K = 2, N = 2",
        loom::Error);
  }

  TEST_CASE("the warning: every sign of more than one task, and nothing else") {
    CHECK(warning({}) == "");
    // One task each: nothing to warn about.
    CHECK(warning({{"SLURM_NTASKS", "1"},
                   {"SLURM_PROCID", "0"},
                   {"SLURM_STEP_NUM_TASKS", "1"},
                   {"SLURM_ARRAY_TASK_COUNT", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "1"},
                   {"PMI_SIZE", "1"},
                   {"PMIX_RANK", "0"},
                   {"WORLD_SIZE", "1"}}) == "");
    // Unreadable values are no sign (and no error: the run does not depend on them).
    CHECK(warning({{"SLURM_NTASKS", "x"}, {"WORLD_SIZE", "-4"}}) == "");
    const std::pair<const char*, const char*> signs[] = {{"SLURM_NTASKS", "4"},
                                                         {"SLURM_STEP_NUM_TASKS", "2"},
                                                         {"SLURM_ARRAY_TASK_COUNT", "8"},
                                                         {"OMPI_COMM_WORLD_SIZE", "3"},
                                                         {"PMI_SIZE", "5"},
                                                         {"PMIX_RANK", "1"},
                                                         {"WORLD_SIZE", "16"}};
    for (auto [name, value] : signs) {
      CAPTURE(name);
      CHECK(warning({{name, value}}) ==
            "no --shard, so this process runs every job of the jobs file, though the environment "
            "shows several tasks (" +
                std::string(name) + "=" + value + kHowTo);
    }
    // An srun step lists both of Slurm's counts.
    CHECK(warning({{"SLURM_STEP_ID", "0"},
                   {"SLURM_STEP_NUM_TASKS", "4"},
                   {"SLURM_NTASKS", "4"},
                   {"SLURM_PROCID", "2"}})
              .find("(SLURM_NTASKS=4, SLURM_STEP_NUM_TASKS=4)") != std::string::npos);
  }

  TEST_CASE("shard_path and in_shard") {
    Shard s{1, 3, "--shard"};
    CHECK(shard_path("out.jsonl", s) == "out.shard-1-of-3.jsonl");
    CHECK(shard_path("runs.v2/out", s) == "runs.v2/out.shard-1-of-3");
    CHECK(shard_path("dir/.hidden", s) == "dir/.hidden.shard-1-of-3");
    CHECK(shard_path("a/b.c.jsonl", s) == "a/b.c.shard-1-of-3.jsonl");
    CHECK(shard_path("-", s) == "-");
    CHECK(shard_path("out.jsonl", Shard{}) == "out.jsonl");
    CHECK(in_shard(4, s));
    CHECK_FALSE(in_shard(5, s));
    CHECK(in_shard(5, Shard{}));
  }

  TEST_CASE("loom run in a Slurm array task: every job without --shard, 3/8 with --shard array") {
    const std::string loom = std::string(LOOM_BIN_DIR) + "/loom";
    const std::string data = LOOM_TESTDATA;
    const std::string jobs = data + "/jobs/tiny_llama.jsonl";
    const fs::path dir =
        fs::temp_directory_path() / ("loom_test_shard_" + std::to_string(getpid()));
    fs::remove_all(dir);
    // env -i: the child sees exactly the array task's variables, not the test runner's.
    std::string env = "env -i";
    for (const auto& [name, value] : kArrayTask) env += " " + name + "=" + value;
    auto run = [&](const std::string& flags, const std::string& sub) {
      fs::create_directories(dir / sub);
      const std::string cmd = env + " " + loom + " run -q --model " + data + "/tiny_llama --jobs " +
                              jobs + " --out " + (dir / sub / "out.jsonl").string() + flags +
                              " 2>" + (dir / "err.txt").string();
      const int status = std::system(cmd.c_str());
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };
    auto listing = [&](const std::string& sub) {
      std::set<std::string> names;
      for (const auto& e : fs::directory_iterator(dir / sub))
        names.insert(e.path().filename().string());
      return names;
    };
    auto samples = [&](const fs::path& path) {
      std::set<std::pair<std::string, int>> seen;
      std::ifstream in(path);
      std::string line;
      while (std::getline(in, line)) {
        const json r = json::parse(line);
        CHECK(r["status"] == "ok");
        seen.insert({r["id"].get<std::string>(), r["sample"].get<int>()});
      }
      return seen;
    };
    auto err = [&] {
      std::ifstream in(dir / "err.txt");
      return std::string(std::istreambuf_iterator<char>(in), {});
    };

    std::set<std::pair<std::string, int>> expected;
    std::vector<std::string> ids;  // in file order
    {
      std::ifstream in(jobs);
      std::string line;
      while (std::getline(in, line)) {
        const json j = json::parse(line);
        ids.push_back(j["id"]);
        for (int k = 0; k < j.value("num_samples", 1); ++k) expected.insert({ids.back(), k});
      }
    }
    REQUIRE(ids.size() == 4);

    // No --shard: the whole file into exactly --out, and the warning despite -q.
    REQUIRE(run("", "plain") == 0);
    CHECK(listing("plain") == std::set<std::string>{"out.jsonl", "out.jsonl.loom.json"});
    CHECK(samples(dir / "plain" / "out.jsonl") == expected);
    CHECK(err() == "loom: warning: " + warning(kArrayTask) + "\n");

    // --shard array: task 3 of 8 keeps line 3 only, in its own shard file.
    REQUIRE(run(" --shard array", "array") == 0);
    CHECK(listing("array") ==
          std::set<std::string>{"out.shard-3-of-8.jsonl", "out.shard-3-of-8.jsonl.loom.json"});
    CHECK(samples(dir / "array" / "out.shard-3-of-8.jsonl") ==
          std::set<std::pair<std::string, int>>{{ids[3], 0}});
    CHECK(err() == "");
    fs::remove_all(dir);
  }
}
