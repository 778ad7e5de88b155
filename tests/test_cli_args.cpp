// The command line itself (issue 14 §3): every argument error is one `loom: error:` line and
// exit 2, with "did you mean" for misspelt commands and options; `loom` alone lists the
// commands; --help shows defaults; LOOM_<OPTION> variables fill options and the command line
// wins; the vLLM-style aliases act as their long names; inspect's job template is a job that
// runs; the deprecated forms warn and still work; bench prints n/a for ceilings on the cpu.
// Every loom started here gets an environment without the caller's LOOM_* variables.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cli_util.h"

extern char** environ;

namespace {

using cli::json;
using cli::kData;

// Drops the LOOM_* variables of whoever runs the tests, so that only the ones a test sets reach
// the loom it starts (children inherit this environment).
void clear_loom_env() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; e++)
    if (std::strncmp(*e, "LOOM_", 5) == 0)
      names.push_back(std::string(*e).substr(0, std::strchr(*e, '=') - *e));
  for (const std::string& n : names) unsetenv(n.c_str());
}

const std::string& dir() {
  static const std::string d = [] {
    clear_loom_env();
    return cli::temp_dir("cli_args");
  }();
  return d;
}

struct Out {
  int code = -1;
  std::string out, err;  // stdout, stderr
};

// `loom <args>` with `env` added, both streams captured.
Out run_loom(const std::string& args, const std::vector<std::string>& env = {}) {
  static int calls = 0;
  const std::string base = dir() + "/call" + std::to_string(calls++);
  std::vector<std::string> words = cli::split_words(args);
  words.insert(words.begin(), cli::kLoom);
  const pid_t pid = fork();
  if (pid == 0) {
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    const int out = ::open((base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    execv(cli::kLoom.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Out o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = cli::slurp(base + ".out");
  o.err = cli::slurp(base + ".err");
  return o;
}

int count_lines(const std::string& s) {
  return int(std::count(s.begin(), s.end(), '\n'));
}

std::string last_line(const std::string& s) {
  const size_t end = s.find_last_not_of('\n');
  const size_t begin = s.find_last_of('\n', end);
  return s.substr(begin == std::string::npos ? 0 : begin + 1, end - begin);
}

const std::string kModel = kData + "/tiny_v1";
const std::string kJobs = kData + "/jobs/tiny_v1.jsonl";

// A run's arguments with a fresh --out under the test folder.
std::string run_args(const std::string& out_name, const std::string& extra = "") {
  return "run -q --backend cpu -m " + kModel + " -i " + kJobs + " -o " + dir() + "/" + out_name +
         " " + extra;
}

}  // namespace

TEST_CASE("loom alone: usage and one line per command on stderr, exit 2") {
  const Out o = run_loom("");
  CHECK(o.code == 2);
  CHECK(o.out == "");
  CHECK(o.err.rfind("usage: loom <command>", 0) == 0);
  // One column for the descriptions, past the longest command name ("calibrate").
  for (const char* line :
       {"\n  run        generate for every job", "\n  inspect    print what loom",
        "\n  merge      join shard result files", "\n  bench      time synthetic",
        "\n  calibrate  FP8 KV scales", "\n  verify     check a --tokens-out folder"})
    CHECK_MESSAGE(o.err.find(line) != std::string::npos, line);
  CHECK(o.err.find("error") == std::string::npos);
}

TEST_CASE("every argument error is one line naming the option and what was expected, exit 2") {
  const std::string m = " -m " + kModel + " -i " + kJobs + " -o " + dir() + "/never.jsonl";
  struct Case {
    std::string args, line;  // the whole stderr, without "loom: error: " and the newline
    std::vector<std::string> env;
  };
  const std::vector<Case> cases = {
      {"rnu", "unknown command \"rnu\"; did you mean \"run\"?"},
      {"run --backend cpu -m " + kModel + " -i " + kJobs + " -o " + dir() + "/v\xff.jsonl",
       "--out " + dir() +
           "/v\xff.jsonl: the path is not valid UTF-8; loom records its paths in "
           "JSON: rename it"},
      {"calibrate --backend cpu -m " + kModel + " --jobs " + dir() + " --out " + dir() + "/s.json",
       "cannot read jobs from " + dir() +
           ": it is a folder; expected a JSONL jobs file, or - for "
           "stdin"},
      {"benhc" + m, "unknown command \"benhc\"; did you mean \"bench\"?"},
      {"frobnicate",
       "unknown command \"frobnicate\"; expected one of run, inspect, merge, bench, calibrate, "
       "verify"},
      {"run --max-seq 4" + m, "unknown option --max-seq for run; did you mean --max-seqs?"},
      {"run --max-num-seq=4" + m,
       "unknown option --max-num-seq for run; did you mean --max-num-seqs?"},
      {"run --no-prefix" + m,
       "unknown option --no-prefix for run; did you mean --no-prefix-sharing?"},
      {"--max-seqs 3 run" + m,
       "unknown option --max-seqs before the command; options go after it: loom run --max-seqs "
       "..."},
      {"run --max-seqs=0" + m, "--max-seqs 0: expected an integer >= 1"},
      {"run --max-seqs 99999999999" + m,
       "--max-seqs 99999999999: expected an integer in [1, 2147483647]"},
      {"run --max-seqs 99999999999999999999" + m,  // past int64 too
       "--max-seqs 99999999999999999999: expected an integer in [1, 2147483647]"},
      // A typo of a required option is said as the typo, not as the option missing.
      {"run --mdoel x -i y -o z", "unknown option --mdoel for run; did you mean --model?"},
      {"run --bakend cpu", "unknown option --bakend for run; did you mean --backend?"},
      {"merge --reports a.json --out b.json --allow-partial",
       "merge --reports: --allow-partial applies to merging results files or --dataset; a "
       "merged report needs every shard's report"},
      {"run --max-seqs four" + m, "--max-seqs four: expected an integer >= 1"},
      {"run --block-size 4096" + m, "--block-size 4096: expected an integer in [1, 1024]"},
      {"run --gpu-memory-fraction 2" + m,
       "--gpu-memory-fraction 2: expected a number in [0.05, 1]"},
      {"run --kv-cache-gib 0" + m, "--kv-cache-gib 0: expected a number > 0"},
      {"run --top-p 0" + m, "--top-p 0: expected a number in (0, 1]"},
      {"run --temperature nan" + m,
       "--temperature nan: expected 0 (greedy) or a number in [1e-05, 3.40282e+38]"},
      // (1e39 overflowed the float to inf; 1e-40 drew NaN garbage: logit / T overflowed.)
      {"run --temperature 1e39" + m,
       "--temperature 1e39: expected 0 (greedy) or a number in [1e-05, 3.40282e+38]"},
      {"run --temperature 1e-40" + m,
       "--temperature 1e-40: expected 0 (greedy) or a number in [1e-05, 3.40282e+38]"},
      {"run --seed -1" + m, "--seed -1: expected an integer in [0, 2^64)"},
      {"run --backend cdua" + m,
       "--backend cdua: expected one of auto, cpu, cuda; did you mean cuda?"},
      {"run --dtype float16" + m,
       "--dtype float16: expected one of auto, bf16, f32 (or bfloat16, float32); did you mean "
       "bfloat16?"},
      {"run" + m + " --max-seqs", "--max-seqs: expected a value (N: most sequences in one step)"},
      {"run --max-seqs 1 --max-seqs 2" + m, "--max-seqs given more than once; expected it once"},
      {"run --backend cpu --backend CPU" + m, "--backend given more than once; expected it once"},
      {"run --resume=maybe" + m, "--resume maybe: expected true or false (a flag)"},
      {"run" + m + " stray",
       "run: unexpected argument \"stray\" (loom run --help lists what it takes)"},
      {"run -m " + kModel + " -i " + kJobs,
       "run needs --out FILE (results JSONL ('-' = stdout); or set LOOM_OUT)"},
      {"run" + m,
       "--max-seqs 0 (from LOOM_MAX_SEQS): expected an integer >= 1",
       {"LOOM_MAX_SEQS=0"}},
      {"run" + m,
       "--quiet maybe (from LOOM_QUIET): expected true or false (a flag)",
       {"LOOM_QUIET=maybe"}},
      {"run --file-seconds 5" + m,
       "--file-seconds applies to the token dataset; expected --tokens-out DIR with it"},
      {"run --backend cpu --device 1" + m,
       "--device selects a CUDA device; the cpu backend has none"},
      {"run --backend cpu --gpu-memory-utilization 0.5" + m,
       "--gpu-memory-fraction applies to cuda; on the cpu backend expected --kv-cache-gib or "
       "--kv-blocks"},
      {"run --kv-blocks 64 --kv-cache-gib 1" + m,
       "--kv-cache-gib sizes the KV pool, which --kv-blocks fixes; expected one of them"},
      {"run --report - -m " + kModel + " -i " + kJobs + " -o -",
       "--report - and --out - both write to stdout; expected a file for one of them"},
      {"inspect", "inspect: expected --model DIR (HF checkpoint directory)"},
      {"inspect " + kModel + " -m " + kModel,
       "inspect: a folder (" + kModel + ") and --model DIR both given; expected --model DIR only"},
      {"bench -m " + kModel + " --jobs 2 --num-jobs 2",
       "bench: --jobs N and --num-jobs N both given; expected --num-jobs only"},
      {"bench -m " + kModel + " --shared-group 4",
       "--shared-group 4 groups the throughput run's jobs; expected --num-jobs N with it"},
      {"bench -m " + kModel + " --shared-only",
       "--shared-only keeps only the shared pass; expected --shared-group N with it"},
      {"bench -m " + kModel + " --batch-sizes 1,0", "--batch-sizes 1,0: expected an integer >= 1"},
      // Options that would do nothing: CLI11 dropped the empty item, --overwrite had no file to
      // replace, the groups' sharing was off, a group was larger than the run.
      {"bench -m " + kModel + " --batch-sizes 1,,2",
       "--batch-sizes 1,,2: expected integers >= 1 separated by commas, found an empty item"},
      {"bench -m " + kModel + " --batch-sizes=8,",
       "--batch-sizes 8,: expected integers >= 1 separated by commas, found an empty item"},
      {"bench -m " + kModel + " --overwrite",
       "--overwrite replaces an existing --json file; expected --json FILE with it"},
      {"bench -m " + kModel + " --overwrite --json -",
       "--overwrite replaces an existing --json file; --json - writes to stdout"},
      {"bench -m " + kModel + " --num-jobs 8 --shared-group 4 --no-prefix-sharing",
       "--no-prefix-sharing turns off the sharing that --shared-group 4 measures; expected one "
       "of them"},
      {"bench -m " + kModel + " --num-jobs 4 --shared-group 5",
       "--shared-group 5: expected an integer in [2, 4] (a group of the --num-jobs 4 jobs)"},
      {"bench -m " + kModel + " --num-jobs 1 --shared-group 2",
       "--shared-group 2: expected no --shared-group with --num-jobs 1 (a group shares among at "
       "least 2 jobs)"},
      // Latency rows that would measure something else than their label: a row twice, limits
      // below a row's batch (--max-seqs was raised to it silently, --max-batch-slots ran it in
      // turns). (An empty --json, which wrote nothing: test_bench_cli.cpp, through a shell.)
      {"bench -m " + kModel + " --batch-sizes 1,8,1",
       "--batch-sizes 1,8,1: 1 given twice; expected each batch size once"},
      {"bench -m " + kModel + " --batch-sizes 1 --batch-sizes 2",
       "--batch-sizes given more than once; expected it once (a list: 1,8,64)"},
      {"bench -m " + kModel + " --batch-sizes 1,4 --max-seqs 2",
       "--max-seqs 2: expected at least 4, the largest of --batch-sizes 1,4 (a latency row runs "
       "that many jobs at once)"},
      {"bench -m " + kModel + " --batch-sizes 4 --max-batch-slots 3",
       "--max-batch-slots 3: expected at least 4, the largest of --batch-sizes 4 (a decode step "
       "of that row takes one slot a job)"},

      {"--version --foo",
       "--version takes no other arguments; found --foo (expected `loom --version` alone)"},
      {"bench --backend cpu --profile -m " + kModel,
       "--profile times CUDA kernels; the cpu backend has none to time"},
      {"-q",
       "unknown option -q before the command; expected a command (run, inspect, merge, bench, "
       "calibrate, verify) first, then its options"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const Out o = run_loom(c.args, c.env);
    CHECK(o.code == 2);
    CHECK(o.err == "loom: error: " + c.line + "\n");
    CHECK(count_lines(o.err) == 1);
  }
}

TEST_CASE("--help shows defaults, aliases and the LOOM_ variables") {
  const Out o = run_loom("run --help");
  CHECK(o.code == 0);
  CHECK(o.out.find("--max-seqs,--max-num-seqs N=256 (Env:LOOM_MAX_SEQS)") != std::string::npos);
  CHECK(o.out.find("--gpu-memory-fraction,--gpu-memory-utilization F=0.9") != std::string::npos);
  CHECK(o.out.find("--progress-interval S=30 (Env:LOOM_PROGRESS_INTERVAL)") != std::string::npos);
  CHECK(o.out.find("-o,--out FILE REQUIRED (Env:LOOM_OUT)") != std::string::npos);
  CHECK(o.out.find("--seed N=0 (Env:LOOM_SEED)") != std::string::npos);
  const Out b = run_loom("bench --help");
  CHECK(b.out.find("--num-jobs N ") != std::string::npos);
  CHECK(b.out.find("Env:") == std::string::npos);  // LOOM_ variables are run's
  // calibrate makes the scales: --kv-scales (refused there) is not offered, nor fp8.
  const Out c = run_loom("calibrate --help");
  CHECK(c.code == 0);
  CHECK(c.out.find("--kv-scales FILE") == std::string::npos);
  CHECK(c.out.find("KV cache element while measuring: auto (the compute dtype) or bf16 (not "
                   "fp8") != std::string::npos);
  CHECK(o.out.find("--kv-scales FILE") != std::string::npos);  // run's
}

TEST_CASE("LOOM_<OPTION> fills an option; the command line wins") {
  // LOOM_MAX_SEQS=0 alone is refused (see above); with --max-seqs 2 typed, the run goes.
  const Out typed = run_loom(run_args("env_typed.jsonl", "--max-seqs 2"), {"LOOM_MAX_SEQS=0"});
  CHECK(typed.code == 0);
  CHECK(typed.err == "");
  CHECK(cli::tokens_by_sample(dir() + "/env_typed.jsonl").size() == 5);
  // A required option from its variable: LOOM_OUT names the results file.
  const std::string env_out = dir() + "/env_out.jsonl";
  const Out filled = run_loom("run -q --backend cpu -m " + kModel + " -i " + kJobs,
                              {"LOOM_OUT=" + env_out, "LOOM_TOKENS_OUT=" + dir() + "/env_ds"});
  CHECK(filled.code == 0);
  CHECK(cli::tokens_by_sample(env_out) == cli::tokens_by_sample(dir() + "/env_typed.jsonl"));
  CHECK(cli::dataset_samples(dir() + "/env_ds").size() == 5);
  // A LOOM_ variable that does not apply warns (a standing default), where typing it is an error.
  const Out ignored =
      run_loom(run_args("env_ignored.jsonl", "--kv-blocks 64 --report " + dir() + "/ign.json"),
               {"LOOM_KV_CACHE_GIB=1"});
  CHECK(ignored.code == 0);
  CHECK(ignored.err ==
        "loom: warning: LOOM_KV_CACHE_GIB is ignored: --kv-cache-gib sizes the KV pool, which "
        "--kv-blocks fixes; expected one of them\n");
  // Not recorded as what set an option: what ran is the default.
  const nlohmann::json prov = nlohmann::json::parse(cli::slurp(dir() + "/ign.json"))["provenance"];
  CHECK(prov["options_from_env"] == nlohmann::json::array());
  CHECK(prov["options"]["kv_cache_gib"] == 2.0);
  // So with every option that needs another: the variable warns and is dropped, the typed
  // option is refused.
  const Out scales = run_loom(run_args("env_scales.jsonl", ""), {"LOOM_KV_SCALES=/none.json"});
  CHECK(scales.code == 0);
  CHECK(scales.err ==
        "loom: warning: LOOM_KV_SCALES is ignored: --kv-scales applies to an fp8 KV cache; "
        "expected --kv-dtype fp8 with it\n");
  const Out no_tokens =
      run_loom(run_args("env_no_tokens.jsonl", ""), {"LOOM_NO_TOKENS_IN_RESULTS=1"});
  CHECK(no_tokens.code == 0);
  CHECK(cli::tokens_by_sample(dir() + "/env_no_tokens.jsonl").size() == 5);  // tokens kept
  CHECK(run_loom(run_args("mega.jsonl", "--megakernel")).err ==
        "loom: error: --megakernel is a cuda decode path; the cpu backend has none\n");
}

// The variables are run's: another command neither reads nor checks them (CLI11 read an
// unselected subcommand's variables, so LOOM_MAX_SEQS=0 failed inspect, and bench blamed its
// own valid --max-seqs 4 for run's 0).
TEST_CASE("LOOM_<OPTION> variables do not reach the other commands") {
  const std::vector<std::string> bad = {"LOOM_MAX_SEQS=0", "LOOM_TOP_P=2", "LOOM_LOG_FORMAT=xml"};
  const Out inspect = run_loom("inspect -m " + kModel, bad);
  CHECK(inspect.code == 0);
  CHECK(inspect.err == "");
  const Out bench = run_loom(
      "bench --backend cpu --frames 1 --batch-sizes 1 --max-seqs 4 --json - -m " + kModel, bad);
  CHECK(bench.code == 0);
  CHECK(nlohmann::json::parse(bench.out)["provenance"]["options"]["max_seqs"] == 4);
  const Out merge = run_loom("merge --dataset " + dir() + "/no_such_dataset", bad);
  CHECK(merge.code == 2);
  CHECK(merge.err.find("max-seqs") == std::string::npos);
}

TEST_CASE("vLLM-style aliases are the options they name") {
  const Out a = run_loom(
      "run -q --backend cpu --max-num-seqs 2 --max-num-batched-tokens 32 --dtype "
      "float32 -m " +
      kModel + " -i " + kJobs + " -o " + dir() + "/alias_short.jsonl");
  const Out b =
      run_loom("run -q --backend cpu --max-seqs 2 --max-batch-slots 32 --dtype f32 --model " +
               kModel + " --jobs " + kJobs + " --out " + dir() + "/alias_long.jsonl");
  REQUIRE(a.code == 0);
  REQUIRE(b.code == 0);
  const auto short_names = cli::tokens_by_sample(dir() + "/alias_short.jsonl");
  CHECK(short_names.size() == 5);
  CHECK(short_names == cli::tokens_by_sample(dir() + "/alias_long.jsonl"));
  // Each alias's value reaches its option (same records alone would not show that).
  const std::string m = " -m " + kModel + " -i " + kJobs + " -o " + dir() + "/never.jsonl";
  CHECK(run_loom("run --max-num-seqs 0" + m).err ==
        "loom: error: --max-seqs 0: expected an integer >= 1\n");
  CHECK(run_loom("run --max-num-batched-tokens 0" + m).err ==
        "loom: error: --max-batch-slots 0: expected an integer >= 1\n");
  CHECK(run_loom("run --gpu-memory-utilization 0.01" + m).err ==
        "loom: error: --gpu-memory-fraction 0.01: expected a number in [0.05, 1]\n");
  CHECK(run_loom("run --backend cpu --dtype bfloat16" + m).err ==
        "loom: error: --dtype bf16 needs the cuda backend (--backend cpu given); the cpu backend "
        "computes in f32\n");
}

TEST_CASE("inspect --model: the job template's example line is a job that runs") {
  for (const std::string model :
       {"tiny_v1", "tiny_v2", "tiny_llama", "tiny_opt", "tiny_gpt2", "tiny_action_tokens"}) {
    CAPTURE(model);
    const Out text = run_loom("inspect --model " + kData + "/" + model);
    REQUIRE(text.code == 0);
    CHECK(text.err == "");
    CHECK(text.out.find("\njob line (loom run --jobs FILE") != std::string::npos);
    const std::string example = last_line(text.out);
    const std::string jobs = dir() + "/template_" + model + ".jsonl";
    std::ofstream(jobs) << example << "\n";
    const std::string out = dir() + "/template_" + model + ".out.jsonl";
    const Out ran =
        run_loom("run -q --backend cpu -m " + kData + "/" + model + " -i " + jobs + " -o " + out);
    CHECK(ran.code == 0);
    const std::vector<json> recs = cli::read_lines(out);
    REQUIRE(recs.size() == 1);
    CHECK(recs[0]["status"] == "ok");
    CHECK(recs[0]["id"] == "example-1");

    const Out as_json = run_loom("inspect --json -m " + kData + "/" + model);
    REQUIRE(as_json.code == 0);
    const json j = json::parse(as_json.out);
    CHECK(j["job_template"]["example"] == json::parse(example));
    CHECK(j["spec"]["vocab"] ==
          json::parse(cli::slurp(kData + "/" + model + "/config.json"))["vocab_size"]);
    CHECK(j["roles"][0]["role"] == "embed");
    CHECK(j["job_template"]["rules"].contains("prompt_token_ids"));
  }
  const Out v1 = run_loom("inspect -m " + kModel);
  CHECK(v1.out.find("13·n_ctx ids: per frame 10 image") != std::string::npos);
  CHECK(v1.out.find("3·(n_ctx + num_frames) rows of 3 numbers") != std::string::npos);
  // An action-token model: the image-id range its table sets, action ids outside it.
  const Out tokens = run_loom("inspect --json -m " + kData + "/tiny_action_tokens");
  CHECK(json::parse(tokens.out)["job_template"]["rules"]["prompt_token_ids"] ==
        "n_ctx whole context frames (1 <= n_ctx <= 6), 11·n_ctx ids: per frame 8 image ids in "
        "[0, 480), then 3 action ids in [0, 512) outside [0, 480)");
  const Out plain = run_loom("inspect -m " + kData + "/tiny_llama");
  CHECK(plain.out.find("prompt_token_ids  1 to 63 token ids in [0, 1000)") != std::string::npos);
  CHECK(plain.out.find("1 to 64 - prompt length (max_position_embeddings 64)") !=
        std::string::npos);
}

TEST_CASE("deprecated forms work for one release, with a warning") {
  const Out old_inspect = run_loom("inspect " + kModel);
  CHECK(old_inspect.code == 0);
  CHECK(old_inspect.err == "loom: warning: `loom inspect DIR` is deprecated; use --model DIR\n");
  CHECK(old_inspect.out == run_loom("inspect --model " + kModel).out);

  const Out old_bench = run_loom("bench --backend cpu -m " + kModel + " --frames 1 --jobs 2");
  CHECK(old_bench.code == 0);
  CHECK(old_bench.err ==
        "loom: warning: bench --jobs N is deprecated (run --jobs is a file); use --num-jobs N\n");
  CHECK(old_bench.out.find("\n       2        0 ") != std::string::npos);  // the 2-job row
}

TEST_CASE("bench on the cpu: n/a for the GPU ceilings and what is relative to them") {
  const std::string js = dir() + "/bench.json";
  const Out o =
      run_loom("bench --backend cpu -m " + kModel + " --frames 1 --num-jobs 2 --json " + js);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("ceilings: copy n/a, bf16 GEMM n/a;") != std::string::npos);
  CHECK(o.out.find("floor n/a at batch 1") != std::string::npos);
  CHECK(o.out.find(" 0 GB/s") == std::string::npos);
  const size_t row = o.out.find("\n     1 ");  // batch 1: "x floor" and "% copy"
  REQUIRE(row != std::string::npos);
  const std::string line = o.out.substr(row + 1, o.out.find('\n', row + 1) - row - 1);
  CHECK(line.find("n/a") != std::string::npos);
  CHECK(line.find("n/a", line.find("n/a") + 3) != std::string::npos);
  const json j = json::parse(cli::slurp(js));
  CHECK(j["copy_gbps"].is_null());
  CHECK(j["latency"][0]["x_floor"].is_null());
  CHECK(j["throughput"][0]["jobs"] == 2);
}

// Needs app/run.cpp to pass RunArgs::sampling to the jobs reader (JobDefaults::sampling); until
// that line lands the defaults are parsed and validated but do not reach the jobs.
TEST_CASE("--seed and --temperature fill what a job's sampling leaves out") {
  const std::string jobs = dir() + "/no_sampling.jsonl";
  {
    const Out text = run_loom("inspect -m " + kModel);
    std::ofstream(jobs) << last_line(text.out) << "\n";  // has no "sampling"
  }
  auto tokens = [&](const std::string& tag, const std::string& extra,
                    const std::vector<std::string>& env = {}) {
    const std::string out = dir() + "/seed_" + tag + ".jsonl";
    REQUIRE(
        run_loom("run -q --backend cpu -m " + kModel + " -i " + jobs + " -o " + out + " " + extra,
                 env)
            .code == 0);
    return cli::tokens_by_sample(out);
  };
  CHECK(tokens("a", "--seed 1") != tokens("b", "--seed 2"));
  CHECK(tokens("c", "--seed 1") == tokens("d", "--seed 1"));
  CHECK(tokens("e", "--seed 1 --temperature 0") == tokens("f", "--seed 2 --temperature 0"));
  CHECK(tokens("g", "--seed 1") == tokens("h", "", {"LOOM_SEED=1"}));
}

// Needs app/run.cpp to write a report_path of "-" to stdout instead of write_file_atomic
// (prepare_outputs already skips probing, creating and locking it).
TEST_CASE("--report - writes the report to stdout") {
  const std::string out = dir() + "/report_stdout.jsonl";
  const Out o =
      run_loom("run -q --backend cpu -m " + kModel + " -i " + kJobs + " -o " + out + " --report -");
  REQUIRE(o.code == 0);
  const json report = json::parse(o.out);
  CHECK(report["generated"]["frames"] == 28);
  CHECK(!cli::fs::exists("-"));
  CHECK(cli::tokens_by_sample(out).size() == 5);
}

// --version and --help print before any command runs: a full disk on stdout is exit 2 there
// too, never a silent exit 0.
TEST_CASE("--version and --help onto a full disk exit 2") {
  if (!std::filesystem::exists("/dev/full")) {
    MESSAGE("skipped: no /dev/full");
    return;
  }
  for (const std::string args : {"--version", "run --help"}) {
    CAPTURE(args);
    const std::string err = dir() + "/full.err";
    const int status = std::system((cli::kLoom + " " + args + " > /dev/full 2> " + err).c_str());
    CHECK(WEXITSTATUS(status) == 2);
    CHECK(cli::slurp(err) == "loom: error: cannot write to stdout: No space left on device\n");
  }
}
