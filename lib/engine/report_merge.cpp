// merge_reports (report_merge.h). How each field of run_report (report.cpp) merges; kFields
// below is this table as data, read both to check a file is a run report and to merge it:
//
//   rule        fields                                          why
//   ----------  ----------------------------------------------  -----------------------------------
//   match       model, run_identity (optional)                  other models, or runs whose
//                                                               tokens differ (shards_differ):
//                                                               refused
//   same        jobs, out, backend, dtype, device.name,         settings: the common value, or the
//               kv_cache.block_size, kv_cache.block_bytes,      distinct values (shard order)
//               kv_cache.{dtype, scales} (optional)
//   all         batch_invariant                                 holds only if it held everywhere
//   any         jobs_summary.stopped                            one stopped shard stops the run
//   sum         jobs_summary.{read, accepted, failed,           counts: the shards' work adds up
//               samples_*}, generated.{tokens, frames,
//               tokens_unwritten}, records.{ok, error, this_run},
//               batch.{steps, prefill_steps, decode_steps,
//               mixed_steps}, kv_cache.{blocks, peak_blocks,
//               prompt_blocks, shared_blocks,
//               prefill_slots_saved, preemptions,
//               recomputed_slots}, time_s.{prefill, decode,
//               mixed} (device-seconds)
//   max         device.*_bytes, time_s.load, batch.max_seqs,    one device's figure: the largest;
//               batch.max_slots (optional),
//               kv_cache.peak_utilisation                       a sum describes no device
//   per step    batch.{mean_seqs, mean_slots, mean_step_ms}     Σ(mean × steps) / Σ steps
//   per decode  decode_weight_gbps (optional)                   Σ(GB/s × decode_s) / Σ decode_s
//   recompute   time_s.run, generated.{tokens,frames}_per_s     over the merged wall time: earliest
//               (+ generated.sum_of_shard_rates)                started_utc to latest ended_utc
//   recompute   frame_s.*                                       from the results files' frame times
//   (own)       shard, started_utc, ended_utc                   → "shards" (per-shard totals)
//   left out    ttft_s, tpot_s, queue_s, provenance             in each shard's own report
//
// frame_s counts every "ok" record in the results files, so after a `--resume` it also covers
// the records earlier runs wrote, which generated.frames (this run's work) does not.
#include "engine/report_merge.h"

#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/report.h"
#include "io/dataset_file.h"
#include "io/outputs.h"

namespace loom {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

enum class Kind { integer, number, string, boolean, object };
enum class Rule { match, same, all, any, sum, max, per_step, per_decode_s, recompute };

struct Field {
  const char* path;  // JSON pointer into the report
  Kind kind;
  Rule rule;
  bool optional = false;  // absent from a shard: that shard contributes nothing
};

const Field kFields[] = {
    {"/model", Kind::string, Rule::match},
    {"/run_identity", Kind::object, Rule::match, true},  // older reports lack it
    {"/jobs", Kind::string, Rule::same},
    {"/out", Kind::string, Rule::same},
    {"/backend", Kind::string, Rule::same},
    {"/dtype", Kind::string, Rule::same},
    {"/batch_invariant", Kind::boolean, Rule::all},
    {"/device/name", Kind::string, Rule::same},
    {"/device/memory_bytes", Kind::integer, Rule::max},
    {"/device/weight_bytes", Kind::integer, Rule::max},
    {"/device/kv_bytes", Kind::integer, Rule::max},
    {"/device/peak_bytes", Kind::integer, Rule::max},
    {"/time_s/load", Kind::number, Rule::max},  // the shards load in parallel
    {"/time_s/run", Kind::number, Rule::recompute},
    {"/time_s/prefill", Kind::number, Rule::sum},
    {"/time_s/decode", Kind::number, Rule::sum},
    {"/time_s/mixed", Kind::number, Rule::sum, true},  // reports before loom 0.2.0 lack it
    {"/jobs_summary/read", Kind::integer, Rule::sum},
    {"/jobs_summary/accepted", Kind::integer, Rule::sum},
    {"/jobs_summary/failed", Kind::integer, Rule::sum},
    {"/jobs_summary/failed_earlier", Kind::integer, Rule::sum, true},
    {"/jobs_summary/samples_done", Kind::integer, Rule::sum},
    {"/jobs_summary/samples_skipped", Kind::integer, Rule::sum},
    {"/jobs_summary/samples_abandoned", Kind::integer, Rule::sum},
    {"/jobs_summary/stopped", Kind::boolean, Rule::any},
    {"/generated/tokens", Kind::integer, Rule::sum},
    {"/generated/frames", Kind::integer, Rule::sum},
    {"/generated/tokens_unwritten", Kind::integer, Rule::sum, true},  // stopped shards only
    {"/generated/tokens_per_s", Kind::number, Rule::recompute},
    {"/generated/frames_per_s", Kind::number, Rule::recompute},
    {"/batch/steps", Kind::integer, Rule::sum},
    {"/batch/prefill_steps", Kind::integer, Rule::sum},
    {"/batch/decode_steps", Kind::integer, Rule::sum},
    {"/batch/mixed_steps", Kind::integer, Rule::sum, true},
    {"/batch/mean_seqs", Kind::number, Rule::per_step},
    {"/batch/max_seqs", Kind::integer, Rule::max},
    {"/batch/max_slots", Kind::integer, Rule::max, true},  // older reports lack it
    {"/batch/mean_slots", Kind::number, Rule::per_step},
    {"/batch/mean_step_ms", Kind::number, Rule::per_step},
    {"/kv_cache/blocks", Kind::integer, Rule::sum},
    {"/kv_cache/block_size", Kind::integer, Rule::same},
    {"/kv_cache/block_bytes", Kind::integer, Rule::same},
    {"/kv_cache/dtype", Kind::string, Rule::same, true},   // older reports lack them
    {"/kv_cache/scales", Kind::string, Rule::same, true},  // fp8 only
    {"/kv_cache/peak_blocks", Kind::integer, Rule::sum},
    {"/kv_cache/peak_utilisation", Kind::number, Rule::max},  // each pool is one device's
    {"/kv_cache/prompt_blocks", Kind::integer, Rule::sum},
    {"/kv_cache/shared_blocks", Kind::integer, Rule::sum},
    {"/kv_cache/prefill_slots_saved", Kind::integer, Rule::sum},
    {"/kv_cache/preemptions", Kind::integer, Rule::sum},
    {"/kv_cache/recomputed_slots", Kind::integer, Rule::sum},
    {"/decode_weight_gbps", Kind::number, Rule::per_decode_s, true},
    {"/records/ok", Kind::integer, Rule::sum, true},  // loom 0.5.0's reports lack records
    {"/records/error", Kind::integer, Rule::sum, true},
    {"/records/this_run", Kind::integer, Rule::sum, true},
};

struct ShardReport {
  std::string path;  // the report file
  json j;
  int index = 0, count = 1;
  Clock::time_point started, ended;
};

double safe_div(double a, double b) {
  return b > 0 ? a / b : 0;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::integer:
      return "an integer";
    case Kind::number:
      return "a number";
    case Kind::string:
      return "a string";
    case Kind::boolean:
      return "true or false";
    case Kind::object:
      return "an object";
  }
  return "?";
}

bool has_kind(const json& v, Kind k) {
  switch (k) {
    case Kind::integer:
      return v.is_number_integer();
    case Kind::number:
      return v.is_number();
    case Kind::string:
      return v.is_string();
    case Kind::boolean:
      return v.is_boolean();
    case Kind::object:
      return v.is_object();
  }
  return false;
}

// "/kv_cache/blocks" → "kv_cache.blocks", as a reader of the report would name it.
std::string dotted(const std::string& pointer) {
  std::string s = pointer.substr(1);
  std::replace(s.begin(), s.end(), '/', '.');
  return s;
}

const json& field(const ShardReport& r, const std::string& pointer, Kind kind) {
  const json::json_pointer p(pointer);
  if (!r.j.contains(p)) {
    fail(r.path, " is not a loom run report: expected field \"", dotted(pointer), "\" (",
         kind_name(kind), "), found none; merge takes the files `loom run --report` writes");
  }
  const json& v = r.j.at(p);
  if (!has_kind(v, kind)) {
    fail(r.path, " is not a loom run report: expected field \"", dotted(pointer), "\" to be ",
         kind_name(kind), ", found ", v.dump().substr(0, 60));
  }
  return v;
}

Clock::time_point utc_field(const ShardReport& r, const char* pointer) {
  const std::string text = field(r, pointer, Kind::string);
  Clock::time_point t;
  if (!parse_utc(text, t)) {
    fail(r.path, ": expected \"", dotted(pointer),
         "\" to be a UTC time like \"2026-11-24T22:31:05.123Z\", found \"", text.substr(0, 60),
         "\"");
  }
  return t;
}

ShardReport load_report(const std::string& path) {
  ShardReport r;
  r.path = path;
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in.is_open(), "cannot read report ", path, ": ", std::strerror(errno));
  r.j = json::parse(in, nullptr, false);
  LOOM_CHECK(!r.j.is_discarded() && r.j.is_object(), path,
             " is not a loom run report: expected a JSON object (`loom run --report` writes one)");
  for (const Field& f : kFields)
    if (!f.optional) field(r, f.path, f.kind);
  const json& index = field(r, "/shard/index", Kind::integer);
  const json& count = field(r, "/shard/count", Kind::integer);
  LOOM_CHECK(count >= 1 && count <= INT32_MAX && index >= 0 && index < count, path,
             ": expected \"shard\" K/N with 0 <= K < N, found ", index.dump(), "/", count.dump());
  r.index = index.get<int>();
  r.count = count.get<int>();
  r.started = utc_field(r, "/started_utc");
  r.ended = utc_field(r, "/ended_utc");
  LOOM_CHECK(r.ended >= r.started, path, ": ended_utc ", format_utc(r.ended),
             " is before started_utc ", format_utc(r.started));
  return r;
}

// The reports must be the shards of one run, each once, none missing.
void check_one_run(const std::vector<ShardReport>& reports) {
  const ShardReport& first = reports[0];
  std::map<int, const ShardReport*> by_index;
  for (const ShardReport& r : reports) {
    if (r.j["model"] != first.j["model"]) {
      fail("reports of different models: expected model ", first.j["model"].dump(), " (as in ",
           first.path, "), found ", r.j["model"].dump(), " in ", r.path,
           "; merge the reports of one run");
    }
    if (r.count != first.count) {
      fail("reports of different runs: expected shard count ", first.count, " (as in ", first.path,
           "), found ", r.count, " in ", r.path, "; merge the reports of one run");
    }
    // Shard runs read one jobs file each; another file (where both names reach a file from
    // here) is another run.
    const nlohmann::json &jobs = r.j["jobs"], &first_jobs = first.j["jobs"];
    if (jobs.is_string() && first_jobs.is_string() && fs::exists(jobs.get<std::string>()) &&
        fs::exists(first_jobs.get<std::string>()) &&
        !same_path(jobs.get<std::string>(), first_jobs.get<std::string>())) {
      fail("reports of different runs: expected jobs ", first_jobs.get<std::string>(), " (as in ",
           first.path, "), found ", jobs.get<std::string>(), " in ", r.path,
           "; merge the reports of one run");
    }
    const std::string differ = shards_differ(r.j, first.j);  // jobs_read, run_identity
    if (!differ.empty())
      fail("reports of different runs: ", r.path, " and ", first.path, ": ", differ,
           "; merge the reports of one run");
    auto [it, fresh] = by_index.emplace(r.index, &r);
    if (!fresh) {
      fail(it->second->path, " and ", r.path, " are both reports of shard ", r.index, "/", r.count,
           "; pass each shard's report once");
    }
  }
  for (int k = 0; k < first.count; ++k) {
    if (!by_index.count(k)) {
      fail("no report of shard ", k, "/", first.count, " among the ", reports.size(),
           " given; a merged report describes the whole run, so pass every shard's report");
    }
  }
}

// The shard's results file: where the report says it is from the report's folder (true after
// the folder moved), then where it was (absolute), then "out" as typed, from here and from the
// report's folder. No fallback to the report's own frame statistics.
std::string results_path(const ShardReport& r) {
  namespace fs = std::filesystem;
  const std::string out = r.j["out"];
  LOOM_CHECK(out != "-", "report ", r.path,
             " is of a run that wrote its results to stdout; merging reports reads the frame "
             "times from each shard's results file, so it needs runs with --out FILE");
  const fs::path folder = fs::path(r.path).parent_path();
  std::vector<std::string> tried;
  auto field = [&](const char* k) {
    return r.j.contains(k) && r.j[k].is_string() ? r.j[k].get<std::string>() : std::string();
  };
  if (!field("results_relative").empty())
    tried.push_back((folder / field("results_relative")).lexically_normal().string());
  if (!field("results").empty()) tried.push_back(field("results"));
  tried.push_back(out);
  tried.push_back((folder / out).lexically_normal().string());
  std::error_code ec;
  std::string list;
  for (size_t i = 0; i < tried.size(); ++i) {
    if (fs::exists(tried[i], ec)) return tried[i];
    if (std::find(tried.begin(), tried.begin() + long(i), tried[i]) == tried.begin() + long(i))
      list += (list.empty() ? "" : ", ") + tried[i];
  }
  fail("report ", r.path, " names results file ", out, ", which does not exist (tried ", list,
       "); merging reports needs every shard's results file for the frame times");
}

// Adds the frame times of every "ok" record of a results file, streaming it line by line.
void add_frame_times(const std::string& results, const ShardReport& r, FrameTimes& times,
                     simdjson::dom::parser& parser) {
  std::ifstream in(results, std::ios::binary);
  LOOM_CHECK(in.is_open(), "cannot read results file ", results, " (named by report ", r.path,
             "): ", std::strerror(errno));
  std::string text;
  int64_t n = 0;
  while (std::getline(in, text)) {
    ++n;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto bad = [&](const std::string& why) {
      fail("results file ", results, " (named by report ", r.path, ") line ", n, ": ", why);
    };
    if (in.eof()) bad("torn line (no newline at its end); finish that shard with --resume");
    simdjson::dom::element root;
    if (auto code = parser.parse(text).get(root)) {
      bad(cat("not valid JSON (", simdjson::error_message(code), ")"));
    }
    std::string_view status;
    if (root["status"].get(status)) bad("expected a result record with a string \"status\"");
    if (status != "ok") continue;
    simdjson::dom::array frame_s;
    auto found = root.at_pointer("/timing/frame_s");
    if (found.error() == simdjson::NO_SUCH_FIELD) continue;  // a plain model's record: no frames
    if (found.get(frame_s)) bad("expected \"timing\".\"frame_s\" to be an array of seconds");
    for (simdjson::dom::element e : frame_s) {
      double s = 0;
      if (e.get(s)) bad("expected \"timing\".\"frame_s\" to be an array of seconds");
      times.add(s);
    }
  }
  LOOM_CHECK(!in.bad(), "cannot read results file ", results, ": ", std::strerror(errno));
}

json merge_field(const Field& f, const std::vector<ShardReport>& reports) {
  const json::json_pointer p(f.path);
  std::vector<const ShardReport*> have;
  for (const ShardReport& r : reports)
    if (!f.optional || r.j.contains(p)) have.push_back(&r);
  if (have.empty()) return nullptr;
  for (const ShardReport* r : have) field(*r, f.path, f.kind);  // an optional one's type too
  auto value = [&](const ShardReport* r) -> const json& { return r->j.at(p); };
  auto weighted = [&](const char* weight) {
    double sum = 0, weights = 0;
    for (const ShardReport* r : have) {
      const double w = r->j.at(json::json_pointer(weight)).get<double>();
      sum += value(r).get<double>() * w;
      weights += w;
    }
    return json(safe_div(sum, weights));
  };
  switch (f.rule) {
    case Rule::match:
      return value(have[0]);  // check_one_run has checked they agree
    case Rule::recompute:
      return nullptr;  // merge_reports sets it
    case Rule::same: {
      json distinct = json::array();
      for (const ShardReport* r : have)
        if (std::find(distinct.begin(), distinct.end(), value(r)) == distinct.end())
          distinct.push_back(value(r));
      return distinct.size() == 1 ? distinct[0] : distinct;
    }
    case Rule::all:
    case Rule::any: {
      bool acc = f.rule == Rule::all;
      for (const ShardReport* r : have)
        acc = f.rule == Rule::all ? acc && value(r).get<bool>() : acc || value(r).get<bool>();
      return acc;
    }
    case Rule::sum:
    case Rule::max: {
      if (f.kind == Kind::integer) {
        int64_t acc = f.rule == Rule::sum ? 0 : value(have[0]).get<int64_t>();
        for (const ShardReport* r : have) {
          const int64_t v = value(r).get<int64_t>();
          acc = f.rule == Rule::sum ? acc + v : std::max(acc, v);
        }
        return acc;
      }
      double acc = f.rule == Rule::sum ? 0 : value(have[0]).get<double>();
      for (const ShardReport* r : have) {
        const double v = value(r).get<double>();
        acc = f.rule == Rule::sum ? acc + v : std::max(acc, v);
      }
      return acc;
    }
    case Rule::per_step:
      return weighted("/batch/steps");
    case Rule::per_decode_s:
      return weighted("/time_s/decode");
  }
  return nullptr;
}

}  // namespace

json merge_reports(const std::vector<std::string>& report_paths) {
  LOOM_CHECK(!report_paths.empty(), "merge: expected at least one report, found none");
  std::vector<ShardReport> reports;
  for (const std::string& path : report_paths) reports.push_back(load_report(path));
  check_one_run(reports);
  std::sort(reports.begin(), reports.end(),
            [](const ShardReport& a, const ShardReport& b) { return a.index < b.index; });

  json m = json::object();
  for (const Field& f : kFields) {
    json v = merge_field(f, reports);
    if (!v.is_null()) m[json::json_pointer(f.path)] = std::move(v);
  }

  // Rates over the merged wall time; the shards run side by side on their own devices, so the
  // sum of their own rates is given too (it is higher when the shards did not overlap fully).
  Clock::time_point started = reports[0].started, ended = reports[0].ended;
  double sum_tokens_per_s = 0, sum_frames_per_s = 0;
  json shards = json::array();
  FrameTimes times;
  simdjson::dom::parser parser;
  for (const ShardReport& r : reports) {
    started = std::min(started, r.started);
    ended = std::max(ended, r.ended);
    sum_tokens_per_s += r.j["generated"]["tokens_per_s"].get<double>();
    sum_frames_per_s += r.j["generated"]["frames_per_s"].get<double>();
    const std::string results = results_path(r);
    add_frame_times(results, r, times, parser);
    shards.push_back({{"report", r.path},
                      {"shard", {{"index", r.index}, {"count", r.count}}},
                      {"started_utc", r.j["started_utc"]},
                      {"ended_utc", r.j["ended_utc"]},
                      {"out", results},
                      {"tokens", r.j["generated"]["tokens"]},
                      {"frames", r.j["generated"]["frames"]},
                      {"tokens_per_s", r.j["generated"]["tokens_per_s"]},
                      {"jobs", r.j["jobs_summary"]}});
  }
  const double wall_s = std::chrono::duration<double>(ended - started).count();
  m["started_utc"] = format_utc(started);
  m["ended_utc"] = format_utc(ended);
  m["time_s"]["run"] = wall_s;
  json& gen = m["generated"];
  gen["tokens_per_s"] = safe_div(gen["tokens"].get<double>(), wall_s);
  gen["frames_per_s"] = safe_div(gen["frames"].get<double>(), wall_s);
  gen["sum_of_shard_rates"] = {{"tokens_per_s", sum_tokens_per_s},
                               {"frames_per_s", sum_frames_per_s}};
  m["frame_s"] = frame_stats(times);
  m["shards"] = std::move(shards);
  return m;
}

}  // namespace loom
