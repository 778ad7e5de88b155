// `loom merge --dataset DIR` (dataset.h merge_dataset). Shards of one run write
// data-NNNNNN.shard-K-of-N.safetensors, manifest.shard-K-of-N.jsonl and
// dataset.shard-K-of-N.json into one folder; the merge writes the folder's whole index —
// manifest.jsonl (the shards' lines in shard order) and dataset.json (summed totals) — and
// moves no data. It refuses rather than guesses, as the results merge does.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "io/dataset.h"
#include "io/dataset_file.h"
#include "io/job_ids.h"
#include "io/outputs.h"

namespace loom {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct ShardInfo {
  int index = 0, count = 0;
  bool busy = false;  // a run is writing it (allow_partial): left out
  std::string info_path, manifest_path;
  json info;
};

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in.is_open(), "cannot read ", path, ": ", std::strerror(errno));
  json j = json::parse(in, nullptr, false);
  LOOM_CHECK(!j.is_discarded() && j.is_object() && j.value("format", "") == "loom-dataset", path,
             ": expected a loom dataset.json (\"format\": \"loom-dataset\"), found something "
             "else");
  return j;
}

// "dataset.shard-K-of-N.json" → K, N; false for any other name.
bool shard_of(const std::string& name, int& k, int& n) {
  return std::sscanf(name.c_str(), "dataset.shard-%d-of-%d.json", &k, &n) == 2 &&
         name == cat("dataset.shard-", k, "-of-", n, ".json");
}

uint64_t key_hash(const std::string& id, uint64_t sample) {
  return job_id_hash(id) ^ ((sample + 1) * 0x9e3779b97f4a7c15ull);
}

// The line at byte `offset` of `path`.
std::string line_at(const std::string& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(std::streamoff(offset));
  std::string text;
  std::getline(in, text);
  return text;
}

}  // namespace

DatasetMerge merge_dataset(const std::string& dir, bool allow_partial, bool no_lock) {
  std::error_code ec;
  LOOM_CHECK(fs::is_directory(dir, ec), "merge --dataset ", dir,
             ": expected a --tokens-out "
             "folder, found ",
             fs::exists(dir, ec) ? "a file" : "nothing");
  std::vector<ShardInfo> shards;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    ShardInfo s;
    if (!shard_of(de.path().filename().string(), s.index, s.count)) continue;
    s.info_path = de.path().string();
    s.manifest_path = cat(dir, "/manifest.shard-", s.index, "-of-", s.count, ".jsonl");
    s.info = read_json_file(s.info_path);
    shards.push_back(std::move(s));
  }
  if (shards.empty()) {
    const bool whole = fs::exists(dir + "/dataset.json", ec);
    fail("merge --dataset ", dir, ": no dataset.shard-K-of-N.json files",
         whole ? " (dataset.json there is already a whole dataset: nothing to merge)"
               : "; expected the --tokens-out folder of a run with --shard");
  }
  // The folder's own index is the merge's to write only when a merge wrote it: an unsharded
  // run's dataset.json and manifest.jsonl there would be replaced, its samples unlisted.
  const std::string index = dir + "/dataset.json";
  if (fs::exists(index, ec)) {
    const json j = read_json_file(index);
    LOOM_CHECK(j.contains("shard") && j["shard"].is_object() && j["shard"].contains("merged_from"),
               "merge --dataset ", dir, ": ", index, " is the index of an unsharded run (",
               j.value("totals", json::object()).value("samples", int64_t(0)),
               " samples), which merging the shards would replace; expected the shards of "
               "one run in a folder of their own");
  }
  std::sort(shards.begin(), shards.end(),
            [](const ShardInfo& a, const ShardInfo& b) { return a.index < b.index; });
  // A shard run holds its lock while it writes (and removes a merged index it finds): with
  // every lock held, what is read below stays as read until the index is written. A shard
  // being written is an error, or with allow_partial an unfinished shard left out.
  std::vector<OutputLock> locks;
  for (ShardInfo& s : shards) {
    DatasetOptions opt;
    opt.dir = dir;
    opt.shard_index = s.index;
    opt.shard_count = s.count;
    try {
      locks.emplace_back(
          dataset_lock_path(opt),
          cat("merge --dataset: --tokens-out ", dir, " shard ", s.index, "/", s.count), no_lock);
    } catch (const Error&) {
      if (!allow_partial) throw;
      s.busy = true;
      s.info["state"] = "running";
      continue;
    }
    s.info = read_json_file(s.info_path);  // again, now that no run can be writing it
  }
  const ShardInfo& first = shards[0];
  DatasetMerge m;
  m.shard_count = first.count;
  std::string unfinished_state;
  // Shards drawn with different Philox streams (core/philox.h; before loom 0.3.0 a file has no
  // draw_stream: stream 1) give other tokens for the same seeds: not one dataset.
  const int first_stream = first.info.value("draw_stream", 1);
  for (const ShardInfo& s : shards) {
    LOOM_CHECK(s.count == first.count, "merge --dataset: ", s.info_path, " is a shard of ", s.count,
               ", ", first.info_path, " of ", first.count, "; expected the shards of one run");
    LOOM_CHECK(s.info["model"]["config_hash"] == first.info["model"]["config_hash"],
               "merge --dataset: ", s.info_path, " was made by ", s.info["model"]["name"].dump(),
               " (", s.info["model"]["config_hash"].dump(), "), ", first.info_path, " by ",
               first.info["model"]["name"].dump(), " (", first.info["model"]["config_hash"].dump(),
               "); expected one model");
    const int stream = s.info.value("draw_stream", 1);
    LOOM_CHECK(stream == first_stream, "merge --dataset: ", s.info_path,
               " was drawn with draw stream ", stream, " (loom ", s.info.value("loom_version", "?"),
               "), ", first.info_path, " with draw stream ", first_stream, " (loom ",
               first.info.value("loom_version", "?"),
               "); expected one stream: rerun the other shards with one loom");
    // One form of sample in the merged index: the readers take it from dataset.json.
    for (const char* key :
         {"frames", "tokens_per_frame", "action_tokens", "action_dim", "vocab_size", "stores"})
      LOOM_CHECK(s.info.value(key, json()) == first.info.value(key, json()),
                 "merge --dataset: ", s.info_path, " has ", key, " ",
                 s.info.value(key, json()).dump(), ", ", first.info_path, " has ",
                 first.info.value(key, json()).dump(),
                 "; expected shards of one run (the same --no-dataset-actions and "
                 "--no-dataset-context)");
    const std::string why = shards_differ(s.info, first.info);  // jobs_read, run_identity
    LOOM_CHECK(why.empty(), "merge --dataset: ", s.info_path, " and ", first.info_path,
               " are not shards of one run: ", why);
    if (s.info.value("state", "") != "complete") {
      if (m.unfinished.empty()) unfinished_state = s.info.value("state", "(none)");
      m.unfinished.push_back(s.index);
    }
  }
  std::vector<bool> present(size_t(m.shard_count), false);
  for (const ShardInfo& s : shards) present[size_t(s.index)] = true;
  for (int k = 0; k < m.shard_count; ++k)
    if (!present[size_t(k)]) m.missing.push_back(k);
  if (!allow_partial) {
    LOOM_CHECK(m.missing.empty(), "merge --dataset ", dir, ": shard ", m.missing[0], "/",
               m.shard_count,
               m.missing.size() > 1 ? cat(" and ", m.missing.size() - 1, " more") : std::string(),
               " missing (no dataset.shard-", m.missing.empty() ? 0 : m.missing[0], "-of-",
               m.shard_count, ".json); run it, or pass --allow-partial");
    LOOM_CHECK(m.unfinished.empty(), "merge --dataset ", dir, ": shard ",
               m.unfinished.empty() ? 0 : m.unfinished[0], "/", m.shard_count, " is not complete",
               " (its dataset.json says \"", unfinished_state,
               "\"); finish it with `loom run --resume`, or pass --allow-partial");
  }

  // The shards' lines, in order, with a hash per sample to catch one sample in two shards.
  std::unordered_map<uint64_t, std::pair<size_t, uint64_t>> seen;  // hash → (shard, offset)
  std::set<std::string> files_checked;
  std::string manifest;
  for (size_t si = 0; si < shards.size(); ++si) {
    const ShardInfo& s = shards[si];
    if (s.busy) continue;
    std::ifstream in(s.manifest_path, std::ios::binary);
    // loom 0.5.0 wrote no manifest for a shard given no jobs: its totals say it is empty.
    if (!in.is_open() && errno == ENOENT && empty_totals(s.info)) {
      m.merged.push_back(s.index);
      continue;
    }
    LOOM_CHECK(in.is_open(), "merge --dataset: cannot read ", s.manifest_path, " (named by ",
               s.info_path, "): ", std::strerror(errno));
    uint64_t offset = 0;
    int64_t n = 0;
    for (std::string text; std::getline(in, text); offset += text.size() + 1) {
      ++n;
      const json e = json::parse(text, nullptr, false);
      LOOM_CHECK(!e.is_discarded() && e.contains("id") && e.contains("sample") &&
                     e.contains("file") && e.contains("rows"),
                 "merge --dataset: ", s.manifest_path, " line ", n,
                 ": expected a manifest entry with id, sample, file and rows");
      const std::string id = id_text(e["id"]);
      const uint64_t sample = e["sample"].get<uint64_t>();
      auto [it, fresh] = seen.emplace(key_hash(id, sample), std::make_pair(si, offset));
      if (!fresh) {
        const ShardInfo& o = shards[it->second.first];
        const json prev = json::parse(line_at(o.manifest_path, it->second.second));
        LOOM_CHECK(!(id_text(prev["id"]) == id && prev["sample"] == e["sample"]),
                   "merge --dataset: job id \"", id, "\" sample ", sample, " is in ",
                   o.manifest_path, " and ", s.manifest_path,
                   "; job ids must be unique across shards");
      }
      const std::string file = e["file"];
      if (files_checked.insert(file).second) {
        LOOM_CHECK(fs::exists(dir + "/" + file, ec), "merge --dataset: ", s.manifest_path, " line ",
                   n, " names ", file, ", which is not in ", dir);
        ++m.files;
      }
      m.rows += e["rows"][1].get<int64_t>() - e["rows"][0].get<int64_t>();
      ++m.samples;
      manifest += text;
      manifest += '\n';
    }
    m.merged.push_back(s.index);
  }

  json info = first.info;
  info["shard"] = {{"index", 0},         {"count", 1},           {"merged_from", m.shard_count},
                   {"shards", m.merged}, {"missing", m.missing}, {"unfinished", m.unfinished}};
  info["manifest"] = "manifest.jsonl";
  info.erase("results");  // shard 0's; each shard's dataset.shard-K-of-N.json names its own
  info.erase("results_relative");
  info["totals"] = {{"files", m.files}, {"samples", m.samples}, {"rows", m.rows}};
  info["state"] = m.missing.empty() && m.unfinished.empty() ? "complete" : "partial";
  info["updated_utc"] = utc_now_iso();
  // A merge stopped between its writes left its temporary files (no shard run removes them):
  // with every lock held no one else writes the merged index, so they go.
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string n = de.path().filename().string();
    if (n.rfind("manifest.jsonl.tmp-", 0) == 0 || n.rfind("dataset.json.tmp-", 0) == 0)
      fs::remove(de.path(), ec);
  }
  write_file_atomic(dir + "/manifest.jsonl", manifest);
  write_file_atomic(dir + "/dataset.json", info.dump(2) + "\n");
  return m;
}

}  // namespace loom
