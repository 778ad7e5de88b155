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
                        {"SLURM_ARRAY_TASK_STEP", "1"},
                        {"SLURM_ARRAY_TASK_MAX", "3"}};
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
        {"array", array, "SLURM_ARRAY_TASK_MAX"},
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

  TEST_CASE("auto: two launchers that disagree are refused; agreeing and nested ones are read") {
    const Vars step = {
        {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "1"}};
    // Fewer torchrun processes than the step has tasks: no launcher started by srun counts so.
    Vars fewer = step;
    fewer.insert({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
    CHECK_THROWS_WITH_AS(resolve("auto", fewer),
                         "RANK=1, WORLD_SIZE=2 but SLURM_PROCID=1, SLURM_STEP_NUM_TASKS=4: "
                         "expected the same rank and size, or WORLD_SIZE above "
                         "SLURM_STEP_NUM_TASKS (a launcher started by the other), found neither; "
                         "unset the stale variables or pass --shard K/N",
                         loom::Error);
    // A batch script exports RANK=0 WORLD_SIZE=3, then srun -n 3 starts loom: task 0 agrees and
    // takes shard 0; tasks 1 and 2 are refused rather than taking shard 0 again.
    for (const char* procid : {"0", "1", "2"}) {
      CAPTURE(procid);
      const Vars stale = {{"SLURM_STEP_ID", "0"},
                          {"SLURM_STEP_NUM_TASKS", "3"},
                          {"SLURM_PROCID", procid},
                          {"RANK", "0"},
                          {"WORLD_SIZE", "3"}};
      if (std::string(procid) == "0") {
        CHECK(same(resolve("auto", stale), 0, 3, "RANK/WORLD_SIZE"));
      } else {
        CHECK_THROWS_WITH_AS(resolve("auto", stale),
                             ("RANK=0, WORLD_SIZE=3 but SLURM_PROCID=" + std::string(procid) +
                              ", SLURM_STEP_NUM_TASKS=3: expected the same rank and size, or "
                              "WORLD_SIZE above SLURM_STEP_NUM_TASKS (a launcher started by the "
                              "other), found neither; unset the stale variables or pass --shard "
                              "K/N")
                                 .c_str(),
                             loom::Error);
      }
    }
    // Launchers outside Slurm are compared with each other too.
    CHECK_THROWS_WITH_AS(resolve("auto", {{"RANK", "0"},
                                          {"WORLD_SIZE", "2"},
                                          {"OMPI_COMM_WORLD_RANK", "1"},
                                          {"OMPI_COMM_WORLD_SIZE", "2"}}),
                         "RANK=0, WORLD_SIZE=2 but OMPI_COMM_WORLD_RANK=1, "
                         "OMPI_COMM_WORLD_SIZE=2: expected the same rank and size, or WORLD_SIZE "
                         "above OMPI_COMM_WORLD_SIZE (a launcher started by the other), found "
                         "neither; unset the stale variables or pass --shard K/N",
                         loom::Error);
    CHECK_THROWS_WITH_AS(resolve("auto", {{"OMPI_COMM_WORLD_RANK", "3"},
                                          {"OMPI_COMM_WORLD_SIZE", "4"},
                                          {"PMI_RANK", "3"},
                                          {"PMI_SIZE", "6"}}),
                         "OMPI_COMM_WORLD_RANK=3, OMPI_COMM_WORLD_SIZE=4 but PMI_RANK=3, "
                         "PMI_SIZE=6: expected the same rank and size, or OMPI_COMM_WORLD_SIZE "
                         "above PMI_SIZE (a launcher started by the other), found neither; unset "
                         "the stale variables or pass --shard K/N",
                         loom::Error);

    // Agreeing duplicates: srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE to the step's; torchrun of
    // one process per srun task with the same numbers; all four at once.
    Vars pmi2 = step, one_each = step, all = step;
    pmi2.insert({{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}});
    one_each.insert({{"RANK", "1"}, {"WORLD_SIZE", "4"}});
    all.insert({{"RANK", "1"},
                {"WORLD_SIZE", "4"},
                {"OMPI_COMM_WORLD_RANK", "1"},
                {"OMPI_COMM_WORLD_SIZE", "4"},
                {"PMI_RANK", "1"},
                {"PMI_SIZE", "4"}});
    CHECK(same(resolve("auto", pmi2), 1, 4, "PMI_RANK/PMI_SIZE"));
    CHECK(same(resolve("auto", one_each), 1, 4, "RANK/WORLD_SIZE"));
    CHECK(same(resolve("auto", all), 1, 4, "RANK/WORLD_SIZE"));
    // Nested: torchrun started by srun --mpi=pmi2 counts more processes than both.
    Vars nested = pmi2;
    nested.insert({{"RANK", "13"}, {"WORLD_SIZE", "16"}});
    CHECK(same(resolve("auto", nested), 13, 16, "RANK/WORLD_SIZE"));
    // Outside an srun step the batch script's SLURM_PROCID is no launcher, so nothing to compare.
    Vars batch = kSbatch;
    batch.insert({{"RANK", "2"}, {"WORLD_SIZE", "4"}});
    CHECK(same(resolve("auto", batch), 2, 4, "RANK/WORLD_SIZE"));
  }

  TEST_CASE("auto: a rank without its size is an error, whatever other launcher is complete") {
    const Vars step = {
        {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "1"}};
    struct Case {
      Vars vars;
      std::string message;
    };
    const std::vector<Case> cases = {
        // The full inner pair used to hide the lone outer rank, and only this order failed.
        {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}},
         "OMPI_COMM_WORLD_RANK=2 but OMPI_COMM_WORLD_SIZE is not set: expected both, found one"},
        {{{"RANK", "1"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
         "RANK=1 but WORLD_SIZE is not set: expected both, found one"},
        {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"PMI_SIZE", "2"}},
         "PMI_SIZE=2 but PMI_RANK is not set: expected both, found one"},
        {{{"RANK", "1"}, {"WORLD_SIZE", "8"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}},
         "SLURM_PROCID=1 but SLURM_STEP_NUM_TASKS is not set: expected both, found one"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.message);
      CHECK_THROWS_WITH_AS(resolve("auto", c.vars), c.message.c_str(), loom::Error);
    }
    Vars lone_in_step = step;
    lone_in_step["WORLD_SIZE"] = "4";
    CHECK_THROWS_WITH_AS(resolve("auto", lone_in_step),
                         "WORLD_SIZE=4 but RANK is not set: expected both, found one", loom::Error);
  }

  TEST_CASE("array: the array variables must agree with each other") {
    auto array = [](const char* id, const char* count, const char* min, const char* max,
                    const char* step) {
      Vars v = {{"SLURM_ARRAY_TASK_ID", id}, {"SLURM_ARRAY_TASK_COUNT", count}};
      if (*min) v["SLURM_ARRAY_TASK_MIN"] = min;
      if (*max) v["SLURM_ARRAY_TASK_MAX"] = max;
      if (*step) v["SLURM_ARRAY_TASK_STEP"] = step;
      return v;
    };
    const char* const kRegular = "; loom shards need a regular --array=A-B[:S]";
    // --array=0-9 seen with a COUNT of 4: not one array.
    CHECK_THROWS_WITH_AS(resolve("array", array("3", "4", "0", "9", "")),
                         (std::string("SLURM_ARRAY_TASK_COUNT=4: expected "
                                      "(SLURM_ARRAY_TASK_MAX - SLURM_ARRAY_TASK_MIN) / "
                                      "SLURM_ARRAY_TASK_STEP + 1 = (9 - 0) / 1 + 1 = 10, found 4") +
                          kRegular)
                             .c_str(),
                         loom::Error);
    // An id past the array's last.
    CHECK_THROWS_WITH_AS(
        resolve("array", array("2", "4", "", "1", "")),
        (std::string("SLURM_ARRAY_TASK_ID=2: expected at most SLURM_ARRAY_TASK_MAX (1), found 2") +
         kRegular)
            .c_str(),
        loom::Error);
    // --array=1,3,7: Slurm counts 3 tasks from 1 to 7; no step makes that regular.
    for (const char* step : {"1", "2", "3", "6"}) {
      CAPTURE(step);
      CHECK_THROWS_AS(resolve("array", array("3", "3", "1", "7", step)), loom::Error);
    }
    CHECK_THROWS_WITH_AS(resolve("array", array("0", "1", "0", "0", "0")),
                         "SLURM_ARRAY_TASK_STEP=0: expected a step >= 1", loom::Error);
    // Regular arrays pass: --array=0-7, --array=4-12:4 (MAX the last id or the bound given).
    Vars full = kArrayTask;
    full["SLURM_ARRAY_TASK_MAX"] = "7";
    CHECK(same(resolve("array", full), 3, 8, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"));
    for (const char* max : {"12", "14", ""}) {
      CAPTURE(max);
      CHECK(same(resolve("array", array("8", "3", "4", max, "4")), 1, 3,
                 "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"));
    }
    CHECK(same(resolve("array", array("5", "1", "5", "5", "1")), 0, 1,
               "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"));
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
    // A name already tagged would be tagged twice; the message gives the name to pass instead.
    CHECK_THROWS_WITH_AS(check_untagged("--out", "a.shard-2/r.shard-0-of-3.shard-2-of-3.jsonl", s),
                         "--out a.shard-2/r.shard-0-of-3.shard-2-of-3.jsonl already has a shard "
                         "tag (.shard-0-of-3): pass the untagged name, a.shard-2/r.jsonl; loom "
                         "adds the tag (shard 1/3 writes a.shard-2/r.shard-1-of-3.jsonl)",
                         loom::Error);
    CHECK_THROWS_WITH_AS(check_untagged("--report", "rep.shard-1-of-3", s),
                         "--report rep.shard-1-of-3 already has a shard tag (.shard-1-of-3): pass "
                         "the untagged name, rep; loom adds the tag (shard 1/3 writes "
                         "rep.shard-1-of-3)",
                         loom::Error);
    // Not a tag: in a folder's name, or running on into more than the extension.
    for (const char* fine : {"out.jsonl", "runs.shard-0-of-3/out.jsonl", "r.shard-0-of-3x.jsonl",
                             "r.shard-a-of-3.jsonl", "rshard-0-of-3.jsonl", "-"}) {
      CAPTURE(fine);
      CHECK_NOTHROW(check_untagged("--out", fine, s));
    }
    CHECK_NOTHROW(check_untagged("--out", "r.shard-0-of-3.jsonl", Shard{}));
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

  TEST_CASE("loom run refuses --shard \"\" and an --out or --report that already has a shard tag") {
    const std::string loom = std::string(LOOM_BIN_DIR) + "/loom";
    const std::string data = LOOM_TESTDATA;
    const fs::path dir =
        fs::temp_directory_path() / ("loom_test_shard_args_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "out");
    // env -i: no LOOM_ variable or launcher of the test runner reaches the child.
    auto run = [&](const std::string& flags) {
      const std::string cmd = "env -i " + loom + " run -q --backend cpu --model " + data +
                              "/tiny_llama --jobs " + data + "/jobs/tiny_llama.jsonl " + flags +
                              " 2>" + (dir / "err.txt").string();
      const int status = std::system(cmd.c_str());
      std::ifstream in(dir / "err.txt");
      return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                            std::string(std::istreambuf_iterator<char>(in), {}));
    };
    const std::string out = (dir / "out").string();

    // `--shard "$SHARD"` with SHARD unset is a typo, not a request to run every job.
    for (const std::string& flags :
         {"--shard '' --out " + out + "/r.jsonl", "--out " + out + "/r.jsonl --shard ''"}) {
      CAPTURE(flags);
      const auto [code, err] = run(flags);
      CHECK(code == 2);
      CHECK(err == "loom: error: --shard \"\": expected K/N, auto or array\n");
    }

    // A tagged name would be tagged again (r.shard-0-of-2.shard-1-of-2.jsonl), which merge
    // reads as shard 0.
    {
      const auto [code, err] = run("--shard 1/2 --out " + out + "/r.shard-0-of-2.jsonl");
      CHECK(code == 2);
      CHECK(err == "loom: error: --out " + out +
                       "/r.shard-0-of-2.jsonl already has a shard tag (.shard-0-of-2): pass the "
                       "untagged name, " +
                       out + "/r.jsonl; loom adds the tag (shard 1/2 writes " + out +
                       "/r.shard-1-of-2.jsonl)\n");
    }
    {
      const auto [code, err] = run("--shard 0/3 --out " + out + "/r.jsonl --report " + out +
                                   "/report.shard-0-of-3.json");
      CHECK(code == 2);
      CHECK(err ==
            "loom: error: --report " + out +
                "/report.shard-0-of-3.json already has a shard tag (.shard-0-of-3): pass the "
                "untagged name, " +
                out + "/report.json; loom adds the tag (shard 0/3 writes " + out +
                "/report.shard-0-of-3.json)\n");
    }
    // Nothing was written by the refused runs.
    CHECK(fs::is_empty(dir / "out"));

    // Unsharded, a tagged name is just a name: one shard rerun by hand keeps its file name.
    {
      const auto [code, err] = run("--out " + out + "/r.shard-1-of-2.jsonl");
      CHECK(code == 0);
      CHECK(err == "");
      CHECK(fs::exists(dir / "out" / "r.shard-1-of-2.jsonl"));
    }
    fs::remove_all(dir);
  }
}
