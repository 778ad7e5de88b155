// Provenance (issue 14 §1): `loom --version` names the commit and build; a run's report,
// dataset.json, dataset file metadata and results side file carry one and the same block with
// the command line, host and start time of that run; `bench --json` carries one too; and
// scripts/plot_bench.py draws bench JSON and run reports (issue 14 §4).
#include <doctest/doctest.h>

#include <chrono>

#include "cli_util.h"
#include "core/version.h"
#include "engine/report.h"
#include "io/provenance.h"

using namespace cli;

namespace {

const std::string kSource = fs::path(kData).parent_path().string();

// stdout and stderr of a shell command, and its exit code.
std::pair<int, std::string> shell(const std::string& command, const std::string& dir) {
  const std::string out = dir + "/shell.txt";
  const int status = std::system((command + " > " + out + " 2>&1").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out)};
}

std::string host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// The provenance block of a dataset file's __metadata__ (JSON text there).
json file_provenance(const std::string& dir) {
  for (const auto& de : fs::directory_iterator(dir)) {
    if (de.path().extension() != ".safetensors") continue;
    std::ifstream in(de.path(), std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    std::string header(n, '\0');
    in.read(header.data(), std::streamsize(n));
    return json::parse(json::parse(header)["__metadata__"]["provenance"].get<std::string>());
  }
  FAIL("no dataset file in ", dir);
  return {};
}

}  // namespace

TEST_CASE("shell_quote: a word a POSIX shell reads back as it was") {
  CHECK(loom::shell_quote("--max-seqs=4") == "--max-seqs=4");
  CHECK(loom::shell_quote("/data/terra_v1") == "/data/terra_v1");
  CHECK(loom::shell_quote("") == "''");
  CHECK(loom::shell_quote("two words") == "'two words'");
  CHECK(loom::shell_quote("it's") == "'it'\\''s'");
  CHECK(loom::shell_quote("$HOME") == "'$HOME'");
  CHECK(loom::shell_join({"loom", "run", "a b"}) == "loom run 'a b'");
}

TEST_CASE("--version: the version, the commit of the checkout, the build") {
  const std::string dir = temp_dir("prov_version");
  const auto [code, text] = shell(kLoom + " --version", dir);
  CHECK(code == 0);
  CHECK(text.rfind("loom " + std::string(loom::kLoomVersion) + "\n", 0) == 0);
  const auto [git_code, head] = shell("git -C " + kSource + " rev-parse --short HEAD", dir);
  if (fs::exists(kSource + "/.git") && !fs::exists(kSource + "/COMMIT")) {
    REQUIRE(git_code == 0);
    const std::string commit = head.substr(0, head.find('\n'));
    CHECK(text.find("\ncommit " + commit) != std::string::npos);
  } else {
    MESSAGE("no .git in ", kSource, ": the commit is not compared");
  }
  if (!loom::build_info().cuda) CHECK(text.find("CUDA off") != std::string::npos);
  CHECK(text.find(loom::build_info().build_type) != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("run: the report, dataset.json, a dataset file and the side file carry one provenance") {
  const std::string dir = temp_dir("prov_run");
  const std::string args = "run -q --max-seqs 3 --model " + kData + "/tiny_v1 --jobs " + kData +
                           "/jobs/tiny_v1.jsonl --out " + dir + "/out.jsonl --report " + dir +
                           "/report.json --tokens-out " + dir + "/ds";
  const auto before = std::chrono::system_clock::now();
  const Exit e = run(args, dir);
  const auto after = std::chrono::system_clock::now();
  INFO(e.err);
  REQUIRE(e.code == 0);
  const json report = json::parse(std::ifstream(dir + "/report.json"))["provenance"];
  const json info = json::parse(std::ifstream(dir + "/ds/dataset.json"))["provenance"];
  const json side = json::parse(std::ifstream(dir + "/out.jsonl.loom.json"))["provenance"];
  const json file = file_provenance(dir + "/ds");
  CHECK(report.is_object());
  CHECK(report == info);
  CHECK(report == side);
  CHECK(report == file);

  CHECK(report["command_line"] == kLoom + " " + args);
  CHECK(report["host"] == host());
  std::chrono::system_clock::time_point started;
  REQUIRE(loom::parse_utc(report["started_utc"], started));
  CHECK(started >= std::chrono::floor<std::chrono::milliseconds>(before));
  CHECK(started <= after);
  CHECK(report["loom_version"] == loom::kLoomVersion);
  CHECK(report["commit"] == loom::build_info().commit);
  CHECK(report["options"]["max_seqs"] == 3);
  CHECK(report["options"]["tokens_out"] == dir + "/ds");
  CHECK(report["shard"] == json{{"index", 0}, {"count", 1}, {"source", "no --shard"}});
  CHECK(report["model"]["path"] == kData + "/tiny_v1");
  CHECK(report["model"]["architecture"] == "LlamaActionForCausalLM");
  const json identity = json::parse(std::ifstream(dir + "/out.jsonl.loom.json"))["identity"];
  CHECK(report["model"]["config_hash"] == identity["model_fingerprint"]);
  CHECK(report["backend"] == "cpu");
  CHECK(report["dtype"] == json{{"weights", "f32"}, {"kv", "f32"}});
  CHECK(report["device"] == json{{"name", "cpu"}, {"driver", "n/a"}, {"cuda_runtime", "n/a"}});
  fs::remove_all(dir);
}

TEST_CASE("bench --json carries the provenance of its run") {
  const std::string dir = temp_dir("prov_bench");
  // --megakernel: recorded, and on the cpu backend (which has none) no step takes it.
  const std::string args =
      " bench --model " + kData +
      "/tiny_v1 --frames 1 --batch-sizes 1,2 --num-jobs 3 --megakernel --json " + dir +
      "/bench.json";
  const auto [code, text] = shell(kLoom + args, dir);
  INFO(text);
  REQUIRE(code == 0);
  const json b = json::parse(std::ifstream(dir + "/bench.json"));
  const json& p = b["provenance"];
  CHECK(p["command_line"] == kLoom + args);
  CHECK(p["host"] == host());
  CHECK(p["options"]["batch_sizes"] == json{1, 2});
  CHECK(p["options"]["megakernel"] == true);
  CHECK(p["backend"] == "cpu");
  for (const json& row : b["latency"]) {
    CHECK(row["megakernel_steps"] == 0);
    CHECK(row["decode_steps_all_repeats"].get<int64_t>() >= row["decode_steps"].get<int64_t>());
    CHECK(row["decode_steps"].get<int64_t>() > 0);
  }
  // The throughput row says the KV block size that ran: the cpu backend's 16, where the
  // options record 0 (--block-size not given).
  REQUIRE(b["throughput"].size() == 1);
  CHECK(b["throughput"][0]["jobs"] == 3);
  CHECK(b["throughput"][0]["block_size"] == 16);
  CHECK(p["options"]["block_size"] == 0);
  CHECK(p["model"]["architecture"] == "LlamaActionForCausalLM");
  // The table's tokens/s is the JSON's (one definition, engine/report.h).
  for (const json& row : b["latency"]) {
    char cell[32];
    std::snprintf(cell, sizeof cell, " %12.0f ", row["tokens_per_s"].get<double>());
    CHECK(text.find(cell) != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("bench --json - writes the JSON alone to stdout, the table to stderr") {
  const std::string dir = temp_dir("prov_bench_stdout");
  const std::string cmd = kLoom + " bench --backend cpu --model " + kData +
                          "/tiny_v1 --frames 1 --batch-sizes 1 --json - > " + dir +
                          "/out.json 2> " + dir + "/err.txt";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const json b = json::parse(std::ifstream(dir + "/out.json"));  // nothing else on stdout
  CHECK(b["latency"].size() == 1);
  CHECK(b["provenance"]["backend"] == "cpu");
  CHECK(slurp(dir + "/err.txt").find("s/frame") != std::string::npos);  // the table
  CHECK(!fs::exists(dir + "/-"));
  fs::remove_all(dir);
}

TEST_CASE("plot_bench.py draws a committed bench JSON and a run report") {
  const char* py = std::getenv("LOOM_PYTHON");
  const std::string dir = temp_dir("prov_plot");
  if (!py || shell(std::string(py) + " -c 'import matplotlib'", dir).first != 0) {
    MESSAGE("SKIPPED: LOOM_PYTHON (", std::string(py ? py : "unset"),
            ") has no matplotlib; apt-get install python3-matplotlib to run this check");
    fs::remove_all(dir);
    return;
  }
  REQUIRE(run("run -q --model " + kData + "/tiny_v1 --jobs " + kData + "/jobs/tiny_v1.jsonl" +
                  " --out " + dir + "/out.jsonl --report " + dir + "/report.json",
              dir)
              .code == 0);
  const std::string script = std::string(py) + " " + kSource + "/scripts/plot_bench.py ";
  const std::string bench = kSource + "/bench/results/2026-11-22-h200-kernel-profile.json";
  for (const std::string& inputs :
       {bench, dir + "/report.json", bench + " " + dir + "/report.json"}) {
    CAPTURE(inputs);
    fs::remove(dir + "/plot.png");
    const auto [code, text] = shell(script + inputs + " --out " + dir + "/plot.png", dir);
    INFO(text);
    CHECK(code == 0);
    CHECK(fs::exists(dir + "/plot.png"));
    CHECK(fs::file_size(dir + "/plot.png") > 10000);
  }
  fs::remove_all(dir);
}
