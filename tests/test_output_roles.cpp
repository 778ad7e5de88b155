// No command's output takes a file another role owns (README "One file, one role" and "Every
// command's file outputs"), for what an audit found replaced with --overwrite: the model's own
// files (config, index, weights, mapping table), the KV scales, a run's report, a token
// dataset's files, and the jobs file a report names. Through the loom binary (cpu backend).
#include <sys/stat.h>

#include <fstream>

#include "cli_util.h"

using namespace cli;

TEST_CASE("no output, even with --overwrite, replaces an input or another run's file") {
  const std::string dir = temp_dir("roles");
  const std::string model = dir + "/model";
  fs::create_directories(model);
  for (const auto& de : fs::directory_iterator(kData + "/tiny_v1"))
    fs::copy_file(de.path(), model + "/" + de.path().filename().string());
  fs::copy_file(std::string(LOOM_BIN_DIR) + "/models/llama_action.json", dir + "/table.json");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 4, 2);
  const std::string m = " --backend cpu --model " + model + " ";
  for (const char* k : {"0/2", "1/2"})
    REQUIRE(run("run -q" + m + "--jobs " + jobs + " --out " + dir + "/out/r.jsonl --report " + dir +
                    "/out/rep.json --tokens-out " + dir + "/out/ds --shard " + k,
                dir)
                .code == 0);
  REQUIRE(run("calibrate" + m + "--jobs " + jobs + " --margin 3 --out " + dir + "/scales.json", dir)
              .code == 0);
  fs::remove(dir + "/stderr.txt");
  const auto before = tree(dir);

  const std::string run_cmd = "run -q --overwrite" + m + "--jobs " + jobs + " ";
  const std::string bench = "bench --overwrite --frames 1 --context-frames 1" + m;
  const std::string cal = "calibrate --overwrite" + m + "--jobs " + jobs + " --margin 3 ";
  const std::string reports = "merge --overwrite --reports " + dir + "/out/rep.shard-0-of-2.json " +
                              dir + "/out/rep.shard-1-of-2.json ";
  const std::string ds = dir + "/out/ds/";
  struct Case {
    std::string args, error;
  };
  for (const Case& c : std::vector<Case>{
           {run_cmd + "--out " + model + "/config.json",
            "is the same file as a file of --model " + model +
                "/config.json; loom would overwrite the model it reads"},
           {run_cmd + "--out " + dir + "/x.jsonl --report " + model +
                "/model-00001-of-00002.safetensors",
            "loom would overwrite the model it reads"},
           {run_cmd + "--out " + model + "/model.safetensors.index.json",
            "loom would overwrite the model it reads"},
           {run_cmd + "--kv-dtype fp8 --kv-scales " + dir + "/scales.json --out " + dir +
                "/scales.json",
            "loom would overwrite its KV scales"},
           {run_cmd + "--out " + ds + "manifest.shard-0-of-2.jsonl",
            "is a file of the token dataset in "},
           {run_cmd + "--out " + dir + "/x.jsonl --report " + ds +
                "data-000000.shard-1-of-2.safetensors",
            "is a file of the token dataset in "},
           {run_cmd + "--out " + dir + "/out/rep.shard-0-of-2.json", "is a loom run's report"},
           {bench + "--json " + model + "/config.json",
            "bench: --json " + model + "/config.json is also an input"},
           {bench + "--model-table " + dir + "/table.json --json " + dir + "/table.json",
            "is also an input"},
           {bench + "--json " + std::string(LOOM_BIN_DIR) + "/models/llama_action.json",
            "is also an input"},
           {bench + "--json " + dir + "/out/rep.shard-1-of-2.json", "is a loom run's report"},
           {cal + "--out " + model + "/model-00002-of-00002.safetensors", "is also an input"},
           {reports + "--out " + jobs, "merge: --out " + jobs + " is also an input"},
           {reports + "--out " + ds + "SHA256SUMS.shard-0-of-2", "is a file of the token dataset"},
           {reports + "--out " + ds + "dataset.shard-1-of-2.json",
            "is a file of the token dataset"},
           {"merge --overwrite --jobs " + jobs + " --out " + dir + "/out/rep.shard-0-of-2.json " +
                dir + "/out/r.shard-0-of-2.jsonl " + dir + "/out/r.shard-1-of-2.jsonl",
            "is a loom run's report"}}) {
    Exit e = run(c.args, dir);
    CHECK_MESSAGE(e.code == 2, c.args);
    CHECK_MESSAGE(e.err.find(c.error) != std::string::npos, e.err, " lacks: ", c.error);
  }
  fs::remove(dir + "/stderr.txt");  // run()'s capture of the last refusal
  CHECK(tree(dir) == before);

  // What merge --reports writes is no run's report: a second merge replaces it.
  const std::string merged = dir + "/merged.json";
  CHECK(run(reports + "--out " + merged, dir).code == 0);
  CHECK(run(reports + "--out " + merged, dir).code == 0);
  CHECK(json::parse(slurp(merged))["shards"].size() == 2);
}

// Outputs are renamed into place with side and lock files beside them: a pipe or a device
// given as one is refused before any work (bench --json replaced a FIFO, and /dev/full, with
// a plain file); a symlink is written through, the link kept.
TEST_CASE("an output that is a pipe is refused; one that is a symlink is written through") {
  const std::string dir = temp_dir("roles_special");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 2, 2);
  const std::string m = " --backend cpu --model " + kData + "/tiny_v1 ";
  const std::string pipe = dir + "/pipe.json";
  REQUIRE(::mkfifo(pipe.c_str(), 0644) == 0);
  const std::string bench = "bench --frames 1 --context-frames 1 --batch-sizes 1" + m;
  for (const std::string& args :
       {bench + "--json " + pipe, "run -q" + m + "--jobs " + jobs + " --out " + pipe,
        "run -q" + m + "--jobs " + jobs + " --out " + dir + "/r.jsonl --report " + pipe,
        "calibrate" + m + "--jobs " + jobs + " --margin 3 --out " + pipe}) {
    Exit e = run(args, dir);
    CHECK_MESSAGE(e.code == 2, args);
    CHECK_MESSAGE(e.err.find(pipe + ": expected a regular file path, found a named pipe") !=
                      std::string::npos,
                  e.err);
    CHECK(fs::is_fifo(fs::symlink_status(pipe)));
  }
  CHECK(!fs::exists(dir + "/r.jsonl"));

  std::ofstream(dir + "/real.json") << "old";
  fs::create_symlink("real.json", dir + "/link.json");
  REQUIRE(run(bench + "--json " + dir + "/link.json --overwrite", dir).code == 0);
  CHECK(fs::is_symlink(fs::symlink_status(dir + "/link.json")));
  CHECK(json::parse(slurp(dir + "/real.json")).contains("latency"));
  fs::create_symlink("made.json", dir + "/dangling.json");  // its target does not exist yet
  REQUIRE(run(bench + "--json " + dir + "/dangling.json", dir).code == 0);
  CHECK(fs::is_symlink(fs::symlink_status(dir + "/dangling.json")));
  CHECK(json::parse(slurp(dir + "/made.json")).contains("latency"));
}
