// Run reports of a sharded run merged into one (lib/engine/report_merge.h): hand-made reports
// and results files whose merged numbers are worked out here by hand (sums, the wall time from
// the UTC strings, percentiles of a known set of frame times), every refusal with its message,
// the UTC time format, and two shards of a real run of the loom binary merged (and refused when
// their runs differ in what changes tokens: KV format, seed).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "engine/report.h"
#include "engine/report_merge.h"

using namespace loom;
using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::system_clock;

namespace {

// A fresh folder per test case, removed after it.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() /
           ("loom_test_report_merge_" + std::to_string(getpid()) + "_" + name);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& file) const { return (path / file).string(); }
};

void put(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

void put_json(const std::string& path, const json& j) {
  put(path, j.dump(2) + "\n");
}

Clock::time_point utc(const std::string& text) {
  Clock::time_point t;
  REQUIRE(parse_utc(text, t));
  return t;
}

// A report as `loom run` writes it, from stats chosen by the test.
json make_report(const RunStats& st, int index, int count, const std::string& started,
                 const std::string& ended, const std::string& out,
                 const std::string& model = "testdata/m") {
  RunContext ctx;
  ctx.model_dir = model;
  ctx.jobs_path = "jobs.jsonl";
  ctx.out_path = out;
  ctx.backend = "cpu";
  ctx.dtype = "f32";
  ctx.batch_invariant = true;
  ctx.shard_index = index;
  ctx.shard_count = count;
  ctx.started = utc(started);
  ctx.ended = utc(ended);
  ctx.step_bytes = 1000000000;  // 1 GB a decode step: decode_weight_gbps = decode_steps / decode_s
  ctx.device.name = "cpu";
  return run_report(st, ctx);
}

std::string ok_record(int i, const std::vector<double>& frame_s) {
  json r = {{"id", "j" + std::to_string(i)},
            {"sample", 0},
            {"status", "ok"},
            {"line", i + 1},
            {"frames", json::array()},
            {"timing", {{"frame_s", frame_s}}}};
  for (size_t f = 0; f < frame_s.size(); ++f) r["frames"].push_back({1, 2});
  return r.dump() + "\n";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Two shards: shard 0 from 22:00:00.000 to 22:00:10.000 (10 s), shard 1 from 22:00:02.500 to
// 22:00:20.000 (17.5 s): merged wall time 20 s.
RunStats shard0_stats() {
  RunStats st;
  st.jobs_read = 5, st.jobs_ok = 4, st.jobs_failed = 1, st.samples_done = 6;
  st.tokens = 1000, st.frames = 100;
  st.wall_s = 10, st.prefill_s = 1, st.decode_s = 4;
  st.prefill_steps = 2, st.decode_steps = 8;
  st.scheduler.steps = 10, st.scheduler.seq_steps = 40, st.scheduler.slots = 100;
  st.scheduler.max_batch = 7, st.scheduler.preemptions = 2, st.scheduler.shared_blocks = 3;
  st.scheduler.max_slots = 90;
  st.kv_blocks = 100, st.kv_peak_blocks = 50, st.block_size = 16, st.kv_block_bytes = 4096;
  return st;
}

RunStats shard1_stats() {
  RunStats st;
  st.jobs_read = 6, st.jobs_ok = 6, st.samples_done = 9, st.samples_skipped = 2;
  st.tokens = 3000, st.frames = 300;
  st.wall_s = 17.5, st.prefill_s = 2, st.decode_s = 9;
  st.prefill_steps = 3, st.decode_steps = 27;
  st.scheduler.steps = 30, st.scheduler.seq_steps = 60, st.scheduler.slots = 150;
  st.scheduler.max_batch = 5, st.scheduler.preemptions = 3, st.scheduler.shared_blocks = 4;
  st.scheduler.max_slots = 120;
  st.kv_blocks = 200, st.kv_peak_blocks = 40, st.block_size = 16, st.kv_block_bytes = 4096;
  st.stopped = true;
  return st;
}

// Frame times i / 1000 for i = 1..101, shuffled over records of both shards (odd i in shard 0,
// even i in shard 1): n = 101, mean 0.051, min 0.001, max 0.101, and FrameTimes' percentile
// (nearest rank, index round(q × (n - 1))) is value 1 + round(100 q): p50 0.051, p90 0.091,
// p95 0.096, p99 0.100.
void write_results(const std::string& path0, const std::string& path1) {
  std::vector<double> odd, even;
  for (int i = 1; i <= 101; ++i) (i % 2 ? odd : even).push_back(i / 1000.0);
  std::mt19937 rng(7);
  std::shuffle(odd.begin(), odd.end(), rng);
  std::shuffle(even.begin(), even.end(), rng);
  auto records = [](const std::vector<double>& v, int first) {
    std::string text;
    size_t at = 0;
    for (int k = 0; at < v.size(); ++k) {
      const size_t n = std::min(v.size() - at, size_t(1 + k % 4));
      text +=
          ok_record(first + k, std::vector<double>(v.begin() + long(at), v.begin() + long(at + n)));
      at += n;
      if (k == 2) text += "{\"id\":\"bad\",\"status\":\"error\",\"line\":99,\"error\":\"x\"}\n\n";
      if (k == 3)
        text += "{\"id\":\"p\",\"sample\":0,\"status\":\"ok\",\"line\":98,\"tokens\":[1]}\n";
    }
    return text;
  };
  put(path0, records(odd, 0));
  put(path1, records(even, 1000));
}

}  // namespace

TEST_CASE("utc times: ISO 8601 with milliseconds and Z, and back") {
  using std::chrono::milliseconds;
  CHECK(format_utc(Clock::time_point(milliseconds(0))) == "1970-01-01T00:00:00.000Z");
  CHECK(format_utc(Clock::time_point(milliseconds(1795559465123))) == "2026-11-24T22:31:05.123Z");
  CHECK(format_utc(Clock::time_point(milliseconds(1709208000000))) == "2024-02-29T12:00:00.000Z");
  CHECK(format_utc(Clock::time_point(milliseconds(-1))) == "1969-12-31T23:59:59.999Z");
  // Rounded down to the millisecond, never up into the next second.
  CHECK(format_utc(Clock::time_point(std::chrono::microseconds(1795559465999999))) ==
        "2026-11-24T22:31:05.999Z");

  Clock::time_point t;
  REQUIRE(parse_utc("2026-11-24T22:31:05.123Z", t));
  CHECK(t == Clock::time_point(milliseconds(1795559465123)));
  REQUIRE(parse_utc("2024-02-29T12:00:00.000Z", t));
  CHECK(t == Clock::time_point(milliseconds(1709208000000)));
  for (const char* bad :
       {"2026-02-29T00:00:00.000Z", "2026-11-24T22:31:05Z", "2026-11-24T22:31:05.12Z",
        "2026-11-24 22:31:05.123Z", "2026-11-24T22:31:05.123", "2026-11-24T22:31:05.123Z ",
        "2026-11-24T24:00:00.000Z", "2026-13-01T00:00:00.000Z", ""}) {
    CAPTURE(bad);
    CHECK(!parse_utc(bad, t));
  }
}

TEST_CASE("the run report carries its shard, UTC span and p95/p99/min") {
  RunStats st;
  st.wall_s = 2.5;
  for (int i = 1; i <= 101; ++i) st.frame_s.add(i / 1000.0);
  RunContext ctx;
  ctx.out_path = "results.jsonl";
  ctx.started = utc("2026-11-24T22:31:05.123Z");
  ctx.ended = utc("2026-11-24T22:31:07.623Z");
  json j = run_report(st, ctx);
  CHECK(j["shard"] == json{{"index", 0}, {"count", 1}});
  CHECK(j["started_utc"] == "2026-11-24T22:31:05.123Z");
  CHECK(j["ended_utc"] == "2026-11-24T22:31:07.623Z");
  CHECK(j["frame_s"]["min"].get<double>() == doctest::Approx(0.001));
  CHECK(j["frame_s"]["p95"].get<double>() == doctest::Approx(0.096));
  CHECK(j["frame_s"]["p99"].get<double>() == doctest::Approx(0.100));

  // Unset, the span ends now and lasts the run's wall time.
  const Clock::time_point before = Clock::now();
  j = run_report(st, RunContext{});
  Clock::time_point started, ended;
  REQUIRE(parse_utc(j["started_utc"], started));
  REQUIRE(parse_utc(j["ended_utc"], ended));
  CHECK(ended >= std::chrono::floor<std::chrono::milliseconds>(before));
  CHECK(std::chrono::duration<double>(ended - started).count() ==
        doctest::Approx(2.5).epsilon(1e-3));
}

TEST_CASE("merge two shards: counts summed, rates and frame statistics recomputed") {
  TempDir dir("two");
  // Shard 0's report names its results relative to the report's folder (not the test's working
  // directory), shard 1's by absolute path.
  write_results(dir / "results.shard-0-of-2.jsonl", dir / "results.shard-1-of-2.jsonl");
  put_json(dir / "report.0.json",
           make_report(shard0_stats(), 0, 2, "2026-11-24T22:00:00.000Z", "2026-11-24T22:00:10.000Z",
                       "results.shard-0-of-2.jsonl"));
  put_json(dir / "report.1.json",
           make_report(shard1_stats(), 1, 2, "2026-11-24T22:00:02.500Z", "2026-11-24T22:00:20.000Z",
                       dir / "results.shard-1-of-2.jsonl"));
  // Given out of order: the shards come out by index.
  const json m = merge_reports({dir / "report.1.json", dir / "report.0.json"});

  CHECK(m["model"] == "testdata/m");
  CHECK(m["backend"] == "cpu");
  CHECK(m["out"] == json{"results.shard-0-of-2.jsonl", dir / "results.shard-1-of-2.jsonl"});
  CHECK(m["started_utc"] == "2026-11-24T22:00:00.000Z");
  CHECK(m["ended_utc"] == "2026-11-24T22:00:20.000Z");
  CHECK(m["time_s"]["run"].get<double>() == doctest::Approx(20));
  CHECK(m["time_s"]["prefill"].get<double>() == doctest::Approx(3));
  CHECK(m["time_s"]["decode"].get<double>() == doctest::Approx(13));

  CHECK(m["jobs_summary"] == json{{"read", 11},
                                  {"accepted", 10},
                                  {"failed", 1},
                                  {"failed_earlier", 0},
                                  {"samples_done", 15},
                                  {"samples_skipped", 2},
                                  {"samples_abandoned", 0},
                                  {"stopped", true}});
  const json& gen = m["generated"];
  CHECK(gen["tokens"] == 4000);
  CHECK(gen["frames"] == 400);
  CHECK(gen["tokens_per_s"].get<double>() == doctest::Approx(4000 / 20.0));
  CHECK(gen["frames_per_s"].get<double>() == doctest::Approx(400 / 20.0));
  CHECK(gen["sum_of_shard_rates"]["tokens_per_s"].get<double>() ==
        doctest::Approx(1000 / 10.0 + 3000 / 17.5));
  CHECK(gen["sum_of_shard_rates"]["frames_per_s"].get<double>() ==
        doctest::Approx(100 / 10.0 + 300 / 17.5));

  const json& b = m["batch"];
  CHECK(b["steps"] == 40);
  CHECK(b["prefill_steps"] == 5);
  CHECK(b["decode_steps"] == 35);
  CHECK(b["max_seqs"] == 7);
  CHECK(b["max_slots"] == 120);
  CHECK(b["mean_seqs"].get<double>() == doctest::Approx((40 + 60) / 40.0));
  CHECK(b["mean_slots"].get<double>() == doctest::Approx((100 + 150) / 40.0));
  CHECK(b["mean_step_ms"].get<double>() == doctest::Approx(1e3 * (5 + 11) / 40.0));

  const json& kv = m["kv_cache"];
  CHECK(kv["blocks"] == 300);
  CHECK(kv["peak_blocks"] == 90);
  CHECK(kv["peak_utilisation"].get<double>() == doctest::Approx(0.5));  // shard 0's 50/100
  CHECK(kv["block_size"] == 16);
  CHECK(kv["preemptions"] == 5);
  CHECK(kv["shared_blocks"] == 7);
  // 8 + 27 decode steps of 1 GB in 4 + 9 s.
  CHECK(m["decode_weight_gbps"].get<double>() == doctest::Approx(35.0 / 13.0));

  const json& fs_ = m["frame_s"];
  CHECK(fs_["count"] == 101);
  CHECK(fs_["mean"].get<double>() == doctest::Approx(0.051));
  CHECK(fs_["min"].get<double>() == doctest::Approx(0.001));
  CHECK(fs_["p50"].get<double>() == doctest::Approx(0.051));
  CHECK(fs_["p90"].get<double>() == doctest::Approx(0.091));
  CHECK(fs_["p95"].get<double>() == doctest::Approx(0.096));
  CHECK(fs_["p99"].get<double>() == doctest::Approx(0.100));
  CHECK(fs_["max"].get<double>() == doctest::Approx(0.101));

  REQUIRE(m["shards"].size() == 2);
  const json& s0 = m["shards"][0];
  CHECK(s0["report"] == dir / "report.0.json");
  CHECK(s0["shard"] == json{{"index", 0}, {"count", 2}});
  CHECK(s0["out"] == dir / "results.shard-0-of-2.jsonl");  // resolved beside the report
  CHECK(s0["tokens"] == 1000);
  CHECK(s0["frames"] == 100);
  CHECK(s0["tokens_per_s"].get<double>() == doctest::Approx(100));
  CHECK(s0["jobs"]["read"] == 5);
  CHECK(m["shards"][1]["started_utc"] == "2026-11-24T22:00:02.500Z");
  CHECK(m["shards"][1]["tokens"] == 3000);
}

TEST_CASE("merge one report: the single-run form") {
  TempDir dir("one");
  put(dir / "results.jsonl", ok_record(0, {0.25, 0.5}) + ok_record(1, {1.0}) + ok_record(2, {}));
  RunStats st = shard0_stats();
  put_json(dir / "report.json", make_report(st, 0, 1, "2026-11-24T23:59:59.000Z",
                                            "2026-11-25T00:00:07.000Z", dir / "results.jsonl"));
  const json m = merge_reports({dir / "report.json"});
  CHECK(m["out"] == dir / "results.jsonl");                       // one value, not a list
  CHECK(m["time_s"]["run"].get<double>() == doctest::Approx(8));  // across midnight
  CHECK(m["generated"]["tokens"] == 1000);
  CHECK(m["generated"]["tokens_per_s"].get<double>() == doctest::Approx(1000 / 8.0));
  CHECK(m["generated"]["sum_of_shard_rates"]["tokens_per_s"].get<double>() ==
        doctest::Approx(1000 / 10.0));
  CHECK(m["batch"]["mean_seqs"].get<double>() == doctest::Approx(4));
  CHECK(m["kv_cache"]["peak_utilisation"].get<double>() == doctest::Approx(0.5));
  CHECK(m["frame_s"]["count"] == 3);
  CHECK(m["frame_s"]["mean"].get<double>() == doctest::Approx(1.75 / 3));
  CHECK(m["frame_s"]["p50"].get<double>() == doctest::Approx(0.5));
  CHECK(m["frame_s"]["min"].get<double>() == doctest::Approx(0.25));
  CHECK(m["shards"].size() == 1);
}

TEST_CASE("merge refuses reports that are not the shards of one run") {
  TempDir dir("refuse");
  const std::string r0 = dir / "report.0.json", r1 = dir / "report.1.json",
                    other = dir / "other.json", results = dir / "results.jsonl";
  put(results, ok_record(0, {0.5}));
  const std::string t0 = "2026-11-24T22:00:00.000Z", t1 = "2026-11-24T22:00:10.000Z";
  put_json(r0, make_report(shard0_stats(), 0, 2, t0, t1, results));
  put_json(r1, make_report(shard1_stats(), 1, 2, t0, t1, results));

  SUBCASE("two reports of one shard") {
    put_json(other, make_report(shard1_stats(), 1, 2, t0, t1, results));
    const std::string e = error_of([&] { merge_reports({r0, r1, other}); });
    CHECK(has(e, r1 + " and " + other + " are both reports of shard 1/2"));
  }
  SUBCASE("shards of two jobs files") {
    const std::string a = dir / "a.jsonl", b = dir / "b.jsonl";
    put(a, "{}\n");
    put(b, "{}\n");
    json j0 = make_report(shard0_stats(), 0, 2, t0, t1, results);
    json j1 = make_report(shard1_stats(), 1, 2, t0, t1, results);
    j0["jobs"] = a;
    j1["jobs"] = b;
    put_json(r0, j0);
    put_json(r1, j1);
    const std::string e = error_of([&] { merge_reports({r0, r1}); });
    CHECK(has(e, "reports of different runs: expected jobs " + a + " (as in " + r0 + "), found " +
                     b + " in " + r1));
  }
  SUBCASE("shards that read other job lines") {
    json j0 = make_report(shard0_stats(), 0, 2, t0, t1, results);
    json j1 = make_report(shard1_stats(), 1, 2, t0, t1, results);
    j0["jobs_read"] = {{"lines", 30}, {"hash", "fnv1a64:873825fd3e9f6a9a"}};
    j1["jobs_read"] = {{"lines", 39}, {"hash", "fnv1a64:a20cfa17abc79b87"}};
    put_json(r0, j0);
    put_json(r1, j1);
    const std::string e = error_of([&] { merge_reports({r0, r1}); });
    CHECK(has(e,
              "reports of different runs: " + r1 + " and " + r0 +
                  ": they read other job lines (jobs_read {\"hash\":\"fnv1a64:a20cfa17abc79b87\""));
  }
  SUBCASE("shards of runs whose tokens differ (run_identity: seed, KV dtype and scales)") {
    json j0 = make_report(shard0_stats(), 0, 2, t0, t1, results);
    json j1 = make_report(shard1_stats(), 1, 2, t0, t1, results);
    j0["run_identity"] = {{"dtype", "f32"}, {"draw_stream", 4}};
    j1["run_identity"] = {{"dtype", "f32"}, {"draw_stream", 4}, {"kv_dtype", "fp8"}};
    put_json(r0, j0);
    put_json(r1, j1);
    CHECK(has(error_of([&] {
                merge_reports({r0, r1});
              }),
              "reports of different runs: " + r1 + " and " + r0 +
                  ": their runs differ in kv_dtype: \"fp8\" and \"f32\" (run_identity: what "
                  "changes tokens); merge the reports of one run"));
    // A bf16 cache under f32 arithmetic (recorded since loom 0.6.1) against the f32 cache; an
    // older report that says it only in its provenance is the same run as a newer one.
    j1["run_identity"] = {{"dtype", "f32"}, {"draw_stream", 4}, {"kv_dtype", "bf16"}};
    put_json(r1, j1);
    CHECK(has(error_of([&] {
                merge_reports({r0, r1});
              }),
              ": their runs differ in kv_dtype: \"bf16\" and \"f32\""));
    j0["provenance"]["dtype"]["kv"] = "bf16";
    put_json(r0, j0);
    CHECK(!has(error_of([&] { merge_reports({r0, r1}); }), "kv_dtype"));
    j0.erase("provenance");
    put_json(r0, j0);
    j1["run_identity"] = {{"dtype", "f32"}, {"draw_stream", 4}, {"seed", 7}};
    put_json(r1, j1);
    CHECK(has(error_of([&] {
                merge_reports({r0, r1});
              }),
              ": their runs differ in seed: 7 and (absent)"));
    j1["run_identity"] = j0["run_identity"];
    put_json(r1, j1);
    CHECK(merge_reports({r0, r1})["run_identity"] == j0["run_identity"]);  // kept
  }
  SUBCASE("different shard counts") {
    put_json(other, make_report(shard1_stats(), 2, 3, t0, t1, results));
    const std::string e = error_of([&] { merge_reports({r0, other}); });
    CHECK(has(e, "expected shard count 2 (as in " + r0 + "), found 3 in " + other));
  }
  SUBCASE("different models") {
    put_json(other, make_report(shard1_stats(), 1, 2, t0, t1, results, "testdata/other"));
    const std::string e = error_of([&] { merge_reports({r0, other}); });
    CHECK(has(e, "expected model \"testdata/m\" (as in " + r0 + "), found \"testdata/other\" in " +
                     other));
  }
  SUBCASE("a shard with no report") {
    const std::string e = error_of([&] { merge_reports({r1}); });
    CHECK(has(e, "no report of shard 0/2 among the 1 given"));
  }
  SUBCASE("not a loom run report") {
    put(other, "{\"hello\": 1}\n");
    CHECK(
        has(error_of([&] { merge_reports({other}); }),
            other + " is not a loom run report: expected field \"model\" (a string), found none"));
    json j = make_report(shard1_stats(), 1, 2, t0, t1, results);
    j["generated"].erase("tokens");
    put_json(other, j);
    CHECK(has(error_of([&] {
                merge_reports({r0, other});
              }),
              other + " is not a loom run report: expected field \"generated.tokens\""));
    j = make_report(shard1_stats(), 1, 2, t0, t1, results);
    j.erase("shard");  // a report from before shards were recorded, or a merged one
    put_json(other, j);
    CHECK(has(error_of([&] { merge_reports({r0, other}); }), "expected field \"shard.index\""));
    j = make_report(shard1_stats(), 1, 2, t0, t1, results);
    j["started_utc"] = "yesterday";
    put_json(other, j);
    CHECK(has(error_of([&] {
                merge_reports({r0, other});
              }),
              other + ": expected \"started_utc\" to be a UTC time like"));
    put(other, "not json\n");
    CHECK(has(error_of([&] { merge_reports({other}); }), other + " is not a loom run report"));
    CHECK(has(error_of([&] { merge_reports({dir / "absent.json"}); }),
              "cannot read report " + dir / "absent.json"));
  }
  SUBCASE("a results file that is not there") {
    put_json(other, make_report(shard1_stats(), 1, 2, t0, t1, "gone.jsonl"));
    const std::string e = error_of([&] { merge_reports({r0, other}); });
    CHECK(has(e, "report " + other +
                     " names results file gone.jsonl, which does not exist (tried "
                     "gone.jsonl, " +
                     dir / "gone.jsonl" + ")"));
    put_json(other, make_report(shard1_stats(), 1, 2, t0, t1, "-"));
    CHECK(has(error_of([&] { merge_reports({r0, other}); }), "wrote its results to stdout"));
  }
  SUBCASE("a torn results line") {
    put(results, ok_record(0, {0.5}) + "{\"id\":\"j1\",\"status\":\"ok\"");
    CHECK(has(error_of([&] {
                merge_reports({r0, r1});
              }),
              "results file " + results + " (named by report " + r0 + ") line 2: torn line"));
  }
}

TEST_CASE("two shards of a real run merge to the sum of their reports") {
  TempDir dir("e2e");
  const std::string data = LOOM_TESTDATA;
  std::vector<std::string> reports;
  std::vector<json> shard_reports;
  for (int k = 0; k < 2; ++k) {
    // --report is shard-tagged like --out: report.json → report.shard-K-of-2.json.
    const std::string rep = dir / ("report.shard-" + std::to_string(k) + "-of-2.json");
    const std::string cmd = std::string(LOOM_BIN_DIR) + "/loom run -q --backend cpu --model " +
                            data + "/tiny_v1 --jobs " + data + "/jobs/tiny_v1.jsonl --out " +
                            (dir / "results.jsonl") + " --report " + (dir / "report.json") +
                            " --shard " + std::to_string(k) + "/2";
    const int status = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    json j = json::parse(std::ifstream(rep));
    CHECK(j["out"] == dir / ("results.shard-" + std::to_string(k) + "-of-2.jsonl"));
    CHECK(j["shard"] == json{{"index", k}, {"count", 2}});
    CHECK(j["jobs_read"]["lines"] == 4);  // every line of the file, each shard's and the other's
    reports.push_back(rep);
    shard_reports.push_back(j);
  }
  const json m = merge_reports(reports);

  // A stopped shard's report: its results lack samples, so `loom merge --reports` refuses it.
  json stopped = shard_reports[1];
  stopped["jobs_summary"]["stopped"] = true;
  const std::string stopped_path = dir / "stopped.json", out = dir / "merged.json";
  std::ofstream(stopped_path) << stopped.dump();
  const int refused =
      std::system((std::string(LOOM_BIN_DIR) + "/loom merge --reports " + reports[0] + " " +
                   stopped_path + " --out " + out + " 2> " + (dir / "stopped.err"))
                      .c_str());
  CHECK(WEXITSTATUS(refused) == 2);
  std::ifstream err_in(dir / "stopped.err");
  const std::string err((std::istreambuf_iterator<char>(err_in)), {});
  CHECK(err ==
        "loom: error: merge: " + stopped_path +
            " is the report of a stopped shard (jobs_summary.stopped); finish it with `loom run "
            "--resume`, then merge\n");
  CHECK(!std::filesystem::exists(out));

  int64_t frames_in_results = 0;
  double max_frame_s = 0;
  for (int k = 0; k < 2; ++k) {
    std::ifstream in(dir / ("results.shard-" + std::to_string(k) + "-of-2.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const json r = json::parse(line);
      REQUIRE(r["status"] == "ok");
      frames_in_results += int64_t(r["frames"].size());
      for (double s : r["timing"]["frame_s"]) max_frame_s = std::max(max_frame_s, s);
    }
  }
  const json &g0 = shard_reports[0]["generated"], &g1 = shard_reports[1]["generated"];
  CHECK(m["generated"]["tokens"] == g0["tokens"].get<int64_t>() + g1["tokens"].get<int64_t>());
  CHECK(m["generated"]["frames"] == g0["frames"].get<int64_t>() + g1["frames"].get<int64_t>());
  CHECK(m["jobs_summary"]["read"] == 4);  // tiny_v1.jsonl: 4 jobs over the two shards
  CHECK(frames_in_results > 0);
  CHECK(m["frame_s"]["count"] == frames_in_results);
  CHECK(m["generated"]["frames"] == frames_in_results);
  CHECK(m["frame_s"]["max"].get<double>() == max_frame_s);
  const double wall_s =
      std::chrono::duration<double>(utc(m["ended_utc"]) - utc(m["started_utc"])).count();
  CHECK(m["time_s"]["run"].get<double>() == doctest::Approx(wall_s));
  CHECK(m["generated"]["tokens_per_s"].get<double>() ==
        doctest::Approx(m["generated"]["tokens"].get<double>() / wall_s));
  CHECK(m["generated"]["sum_of_shard_rates"]["tokens_per_s"].get<double>() ==
        doctest::Approx(g0["tokens_per_s"].get<double>() + g1["tokens_per_s"].get<double>()));
  CHECK(m["records"] == json{{"ok", 5}, {"error", 0}, {"this_run", 5}});  // 5 samples
  // What made the tokens is kept: the run identity the shards agree on, and the KV format.
  CHECK(shard_reports[0]["run_identity"]["draw_stream"] == kDrawStream);
  CHECK(m["run_identity"] == shard_reports[0]["run_identity"]);
  CHECK(m["kv_cache"]["dtype"] == "f32");
  CHECK(!m["kv_cache"].contains("scales"));

  // Resubmitted (the README's sbatch script): these runs generate nothing, and the reports say
  // so while still counting what the results files hold.
  for (int k = 0; k < 2; ++k) {
    const std::string cmd = std::string(LOOM_BIN_DIR) + "/loom run -q --backend cpu --model " +
                            data + "/tiny_v1 --jobs " + data + "/jobs/tiny_v1.jsonl --out " +
                            (dir / "results.jsonl") + " --report " + (dir / "report.json") +
                            " --resume --shard " + std::to_string(k) + "/2";
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  const json again = merge_reports(reports);
  CHECK(again["generated"]["tokens"] == 0);
  CHECK(again["records"] == json{{"ok", 5}, {"error", 0}, {"this_run", 0}});

  // The folder moved: each report finds its results beside it by "results_relative" (its
  // "out" and "results" name the old place).
  const std::string moved = dir.path.string() + "_moved";
  fs::rename(dir.path, moved);
  std::vector<std::string> moved_reports;
  for (const std::string& r : reports)
    moved_reports.push_back(moved + "/" + fs::path(r).filename().string());
  const json after = merge_reports(moved_reports);
  fs::rename(moved, dir.path);
  CHECK(after["records"] == again["records"]);
  CHECK(after["frame_s"]["count"] == m["frame_s"]["count"]);
  CHECK(after["shards"][1]["out"] == moved + "/results.shard-1-of-2.jsonl");
}

TEST_CASE("merge --reports refuses shards run with another KV format or seed; fp8 is kept") {
  TempDir dir("kv");
  const std::string data = LOOM_TESTDATA;
  // Shard k of a run with `extra` options; its report's path.
  auto shard = [&](const std::string& run, int k, const std::string& extra) {
    const std::string cmd = std::string(LOOM_BIN_DIR) + "/loom run -q --backend cpu --model " +
                            data + "/tiny_v1 --jobs " + data + "/jobs/tiny_v1.jsonl --out " +
                            (dir / (run + ".jsonl")) + " --report " + (dir / (run + ".json")) +
                            " --shard " + std::to_string(k) + "/2 " + extra + " 2>/dev/null";
    const int status = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    return dir / (run + ".shard-" + std::to_string(k) + "-of-2.json");
  };
  const std::string fp8_0 = shard("fp8", 0, "--kv-dtype fp8"),
                    fp8_1 = shard("fp8", 1, "--kv-dtype fp8");
  const std::string f32_1 = shard("f32", 1, ""),
                    seed_1 = shard("seed", 1, "--kv-dtype fp8 --seed 7");
  const std::string out = dir / "merged.json", err = dir / "merge.err";
  auto merge = [&](const std::string& a, const std::string& b) {
    const int status = std::system((std::string(LOOM_BIN_DIR) + "/loom merge --reports " + a + " " +
                                    b + " --out " + out + " 2> " + err)
                                       .c_str());
    std::ifstream in(err);
    return std::make_pair(WEXITSTATUS(status), std::string(std::istreambuf_iterator<char>(in), {}));
  };
  auto [code, text] = merge(fp8_0, f32_1);
  CHECK(code == 2);
  CHECK(text.find("reports of different runs: " + f32_1 + " and " + fp8_0 +
                  ": their runs differ in kv_dtype: \"f32\" and \"fp8\"") != std::string::npos);
  CHECK(!fs::exists(out));
  std::tie(code, text) = merge(fp8_0, seed_1);
  CHECK(code == 2);
  CHECK(text.find(": their runs differ in seed: 7 and (absent)") != std::string::npos);
  std::tie(code, text) = merge(fp8_0, fp8_1);
  REQUIRE_MESSAGE(code == 0, text);
  const json m = json::parse(std::ifstream(out));
  CHECK(m["kv_cache"]["dtype"] == "fp8");
  CHECK(m["kv_cache"]["scales"] == "default 1.0");
  CHECK(m["run_identity"]["kv_dtype"] == "fp8");
  CHECK(m["run_identity"]["kv_scales"] ==
        json::parse(std::ifstream(fp8_0))["run_identity"]["kv_scales"]);
}
