// `loom bench` on the tiny checkpoints: synthetic jobs are jobs `run` would take (context frames
// within the model's round), a KV pool too small for one job is refused before anything is
// timed, naming the option that sized it, and s/frame leaves the prompt's prefill out
// (bench/README.md, "s/frame"). The refusals of options alone are in test_cli_args.cpp.
#include <doctest/doctest.h>

#include <cstdio>
#include <sstream>

#include "cli_util.h"

namespace {

using cli::json;
using cli::kData;

struct Out {
  int code = -1;
  std::string out, err;  // stdout, stderr
};

// `loom <args>` with both streams captured.
Out run_loom(const std::string& args) {
  static const std::string dir = cli::temp_dir("bench_cli");
  static int calls = 0;
  const std::string base = dir + "/call" + std::to_string(calls++);
  const int st = std::system(
      (cli::kLoom + " " + args + " > " + base + ".out 2> " + base + ".err < /dev/null").c_str());
  Out o;
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  o.out = cli::slurp(base + ".out");
  o.err = cli::slurp(base + ".err");
  return o;
}

const std::string kV1 = kData + "/tiny_v1";  // P 10, A 3: S 13 slots a frame, T 6 frames a round

}  // namespace

TEST_CASE("bench: --context-frames beyond the model's round is refused before anything runs") {
  struct Case {
    std::string args, line;
  };
  const std::vector<Case> cases = {
      {"bench --backend cpu --frames 1 --context-frames 7 -m " + kV1,
       "--context-frames 7: expected an integer in [1, 6] for this model (its temporal table has "
       "6 rows; a job's prompt holds at most one round), found 7"},
      // Rotary positions: T is what fits max_position_embeddings 66 (6 frames of 11 slots).
      {"bench --backend cpu --frames 1 --context-frames 50 --num-jobs 1 -m " + kData +
           "/tiny_action_tokens",
       "--context-frames 50: expected an integer in [1, 6] for this model (a round holds 6 "
       "frames; a job's prompt holds at most one round), found 50"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const Out o = run_loom(c.args);
    CHECK(o.code == 2);
    CHECK(o.out == "");  // no table header: refused before the warm-up
    CHECK(o.err == "loom: error: " + c.line + "\n");
  }
  // A whole round of context (the prompt starts from its last `overlap` frames, as in `run`)
  // and generated frames past the round (new rounds) are jobs run takes: bench runs them.
  const Out full = run_loom(
      "bench --backend cpu --frames 8 --context-frames 6 --batch-sizes 1 --json - -m " + kV1);
  REQUIRE_MESSAGE(full.code == 0, full.err);
  const json j = json::parse(full.out);
  CHECK(j["context_frames"] == 6);
  CHECK(j["latency"][0]["s_per_frame"].get<double>() > 0);
}

TEST_CASE("bench: a KV pool that cannot hold one job is refused, naming what sized it") {
  struct Case {
    std::string args, err;
  };
  for (const Case& c : std::vector<Case>{
           // 3 context frames + 1 generated: a round of 4 × 13 = 52 slots, 4 blocks of 16.
           {"--frames 1 --kv-blocks 1",
            "--kv-blocks 1: expected at least 4: one bench job (--context-frames 3, --frames 1) "
            "needs 4 KV blocks of 16 slots (--block-size) for its round of 52 slots; the pool "
            "holds 1"},
           {"--frames 2 --context-frames 1 --kv-blocks 2 --block-size 8",
            "--kv-blocks 2: expected at least 5: one bench job (--context-frames 1, --frames 2) "
            "needs 5 KV blocks of 8 slots (--block-size) for its round of 39 slots; the pool "
            "holds 2"},
           // Sized by memory: 12,288 bytes a block of 16 slots on tiny_v1 (f32): 3e-5 GiB is 2.
           {"--frames 1 --kv-cache-gib 0.00003",
            "bench: one bench job (--context-frames 3, --frames 1) needs 4 KV blocks of 16 slots "
            "(--block-size) for its round of 52 slots; the pool holds 2; expected a larger "
            "pool: raise --kv-cache-gib or give --kv-blocks 4"}}) {
    const Out o = run_loom("bench --backend cpu " + c.args + " -m " + kV1);
    CHECK(o.code == 2);
    CHECK(o.out == "");
    CHECK(o.err == "loom: error: " + c.err + "\n");
  }
  // Exactly enough runs.
  const Out o = run_loom("bench --backend cpu --frames 1 --batch-sizes 1 --kv-blocks 4 -m " + kV1);
  CHECK_MESSAGE(o.code == 0, o.err);
}

// s/frame used to count the first frame from admission: at --frames 1 it was the time to first
// token plus the frame, never less than ttft. Here the prompt's prefill takes 65 one-slot steps
// (--max-batch-slots 1, 5 context frames) and the frame 9 decode steps after its first token.
TEST_CASE("bench: s/frame leaves the prompt's prefill out") {
  const Out o = run_loom(
      "bench --backend cpu --frames 1 --context-frames 5 --max-batch-slots 1 --batch-sizes 1 "
      "--repeats 1 --json - -m " +
      kV1);
  REQUIRE_MESSAGE(o.code == 0, o.err);
  const json row = json::parse(o.out)["latency"][0];
  const double s = row["s_per_frame"], ttft = row["ttft_s"], decode = row["decode_s"];
  CHECK(row["mixed_s"] == 0.0);
  CHECK(row["decode_steps"] == 9);  // P - 1: the first token came from the prefill
  CHECK(s < ttft);
  // The frame's time from its first token spans its 9 decode steps (their step times are
  // disjoint parts of it), scaled to 10 tokens.
  CHECK(s * 9 / 10 >= decode * (1 - 1e-9));
}

// A latency row of more jobs than the pool holds at once ran them in turns under its label
// (and --batch-sizes 100000000 grew memory without bound): refused after the warm-up, which
// sizes the pool. tiny_v1 at --frames 1: a job's round takes 4 blocks of 16 slots.
TEST_CASE("bench: a batch size the KV pool cannot hold at once is refused") {
  const Out o =
      run_loom("bench --backend cpu --frames 1 --batch-sizes 2,3 --kv-blocks 11 -m " + kV1);
  CHECK(o.code == 2);
  CHECK(o.out == "");
  CHECK(o.err ==
        "loom: error: --batch-sizes 3: the KV pool holds 2 bench jobs at once (11 blocks; a job's "
        "round takes 4); expected at most 2, or a larger pool (--kv-cache-gib, --kv-blocks)\n");
  CHECK(run_loom("bench --backend cpu --frames 1 --batch-sizes 3 --kv-blocks 12 -m " + kV1).code ==
        0);
}

// Bytes as the backend holds them: the cpu computes tiny_v1's bf16 weights in f32 and keeps an
// fp8 KV cache in f32 after its round trip (the audit found bench counting the checkpoint's
// 2 bytes a weight and 1 a KV element: GB/s half and a quarter of what moved).
TEST_CASE("bench: weight and KV bytes are counted in the backend's element sizes") {
  const Out info = run_loom("inspect --json -m " + kV1);
  REQUIRE(info.code == 0);
  const int64_t checkpoint_bytes = json::parse(info.out)["step_bytes"];  // bf16
  std::vector<json> rows;
  std::vector<double> t_step;
  for (const char* kv : {"auto", "fp8"}) {
    const Out o =
        run_loom("bench --backend cpu --frames 1 --batch-sizes 1 --num-jobs 2 --kv-dtype " +
                 std::string(kv) + " --json - -m " + kV1);
    REQUIRE_MESSAGE(o.code == 0, o.err);
    const json j = json::parse(o.out);
    CHECK(j["step_weight_bytes"].get<int64_t>() == 2 * checkpoint_bytes);
    const json& t = j["throughput"][0];
    const double steps = t["prefill_steps"].get<double>() + t["decode_steps"].get<double>() +
                         t["mixed_steps"].get<double>();
    const double step_s = t["prefill_s"].get<double>() + t["decode_s"].get<double>() +
                          t["mixed_s"].get<double>();  // the rates' time: the steps'
    CHECK(t["weight_gbps"].get<double>() * step_s ==
          doctest::Approx(2.0 * checkpoint_bytes * steps / 1e9));
    t_step.push_back(step_s);
    rows.push_back(t);
  }
  // The same reads of the same f32 pool: the same KV bytes with and without fp8.
  CHECK(rows[1]["kv_gbps"].get<double>() * t_step[1] ==
        doctest::Approx(rows[0]["kv_gbps"].get<double>() * t_step[0]));
}

// The table printed a tiny model's rates as "%.0f": 0 GB/s and 0.0 TFLOP/s, while the JSON had
// them. Three significant digits below 100.
TEST_CASE("bench: the table's rates keep three digits for a tiny model") {
  const std::string json_path = cli::temp_dir("bench_rates") + "/b.json";
  const Out o = run_loom("bench --backend cpu --frames 1 --batch-sizes 1 --num-jobs 2 --json " +
                         json_path + " -m " + kV1);
  REQUIRE_MESSAGE(o.code == 0, o.err);
  const json j = json::parse(cli::slurp(json_path));
  auto row_after = [&](const std::string& header) {  // the fields of the line after `header`
    const size_t at = o.out.find(header);
    REQUIRE(at != std::string::npos);
    const size_t begin = o.out.find('\n', at) + 1;
    std::istringstream line(o.out.substr(begin, o.out.find('\n', begin) - begin));
    std::vector<std::string> f;
    for (std::string w; line >> w;) f.push_back(w);
    return f;
  };
  auto printed = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return std::string(buf);
  };
  const double g = j["latency"][0]["decode_weight_gbps"];
  REQUIRE(g > 0);
  REQUIRE(g < 100);
  CHECK(row_after(" batch    s/frame")[5] == printed(g));
  const json& t = j["throughput"][0];
  const std::vector<std::string> f = row_after("    jobs    group");
  CHECK(f[5] == printed(t["weight_gbps"]));
  CHECK(f[6] == printed(t["kv_gbps"]));
  CHECK(f[7] != "0.0");
  // The steps line: each kind's count and seconds as the JSON has them.
  char steps[256];
  std::snprintf(steps, sizeof steps,
                "steps: %lld decode (%.2f s), %lld mixed (%.2f s), %lld prefill (%.2f s)\n",
                t["decode_steps"].get<long long>(), t["decode_s"].get<double>(),
                t["mixed_steps"].get<long long>(), t["mixed_s"].get<double>(),
                t["prefill_steps"].get<long long>(), t["prefill_s"].get<double>());
  CHECK(t["decode_steps"].get<long long>() > 0);
  CHECK(t["prefill_steps"].get<long long>() + t["mixed_steps"].get<long long>() > 0);
  CHECK(o.out.find(steps) != std::string::npos);
}

TEST_CASE("bench: an empty --json is refused (it wrote nothing, exit 0)") {
  const Out o = run_loom("bench --backend cpu --frames 1 --json '' -m " + kV1);
  CHECK(o.code == 2);
  CHECK(o.err ==
        "loom: error: --json: expected a file path or - (stdout), found an empty string\n");
}
