// `--resume` with a dataset (dataset.h reconcile_dataset): the results records and the data
// files must tell the same story. A data file commits before its manifest lines and records,
// so after a kill the last file may hold samples whose records were never written: the file
// and the records it has are rolled back, and those samples run again. Nothing that is whole
// and recorded is touched; a file made by another model is an error, never removed.
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/sha256.h"
#include "io/dataset.h"
#include "io/dataset_file.h"
#include "io/job_ids.h"
#include "io/outputs.h"

namespace loom {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// (id text, sample): ids are compared by their text, "8" and 8 alike.
using SampleKey = std::pair<std::string, uint64_t>;

struct Rows {
  std::string file;
  int64_t begin = 0, end = 0;
  bool operator==(const Rows& o) const {
    return file == o.file && begin == o.begin && end == o.end;
  }
};

// Every "ok" record of the results file that names a data file.
std::map<SampleKey, Rows> recorded_rows(const std::string& results_path) {
  std::map<SampleKey, Rows> out;
  std::ifstream in(results_path, std::ios::binary);
  if (!in.is_open()) return out;
  simdjson::dom::parser parser;
  std::string text;
  while (std::getline(in, text)) {
    simdjson::dom::element root;
    if (parser.parse(text).get(root)) continue;  // torn lines are scan_results' business
    std::string_view status, file;
    if (root["status"].get(status) || status != "ok" || root["tokens_file"].get(file)) continue;
    std::string id;
    bool is_number = false;
    uint64_t sample = 0;
    int64_t b = 0, e = 0;
    simdjson::dom::array rows;
    if (!loom::id_text(root["id"], id, is_number)) continue;
    if (root["sample"].get(sample) || root["rows"].get(rows) || rows.size() != 2) continue;
    if (rows.at(0).get(b) || rows.at(1).get(e)) continue;
    out[{id, sample}] = Rows{std::string(file), b, e};
  }
  return out;
}

// Rewrites the results file without the "ok" records whose data was rolled back.
int64_t drop_records(const std::string& results_path, const std::set<SampleKey>& keep_with_data,
                     const std::map<SampleKey, Rows>& recorded) {
  std::ifstream in(results_path, std::ios::binary);
  std::string kept, text;
  int64_t dropped = 0;
  simdjson::dom::parser parser;
  while (std::getline(in, text)) {
    simdjson::dom::element root;
    std::string_view status, file;
    std::string id;
    bool is_number = false;
    uint64_t sample = 0;
    if (!parser.parse(text).get(root) && !root["status"].get(status) && status == "ok" &&
        !root["tokens_file"].get(file) && !root["sample"].get(sample) &&
        loom::id_text(root["id"], id, is_number)) {
      SampleKey key{id, sample};
      if (recorded.count(key) && !keep_with_data.count(key)) {
        ++dropped;
        continue;
      }
    }
    kept += text;
    kept += '\n';
  }
  if (dropped > 0) write_file_atomic(results_path, kept);
  return dropped;
}

}  // namespace

DatasetReconcile reconcile_dataset(const DatasetOptions& opt, const DatasetModel& model,
                                   const std::string& results_path) {
  DatasetReconcile rc;
  std::error_code ec;
  const std::map<SampleKey, Rows> recorded = recorded_rows(results_path);
  // Records name data files only after the shard's manifest exists (a data file commits
  // before its records): without it the folder the records name is not this one.
  LOOM_CHECK(recorded.empty() || fs::exists(dataset_manifest_path(opt), ec),
             "--resume: ", recorded.size(), " records of ", results_path,
             " name data files of --tokens-out ", opt.dir,
             ", which holds no manifest of this shard (",
             fs::path(dataset_manifest_path(opt)).filename().string(),
             "; moved or deleted?): restore it, resume with the --tokens-out that holds them, or "
             "pass --overwrite to start over");
  if (!fs::is_directory(opt.dir, ec)) return rc;

  // Temporary files of this shard ("<name>.tmp-<pid>"): ours is the only live writer (we
  // hold the lock), so any left are from a run that died.
  const std::string mname = fs::path(dataset_manifest_path(opt)).filename().string();
  const std::string iname = fs::path(dataset_info_path(opt)).filename().string();
  const std::string sname = fs::path(dataset_sums_path(opt)).filename().string();
  for (const auto& de : fs::directory_iterator(opt.dir, ec)) {
    const std::string n = de.path().filename().string();
    const size_t tmp = n.find(".tmp-");
    if (tmp == std::string::npos) continue;
    const std::string base = n.substr(0, tmp);
    if (data_file_seq(opt, base) >= 0 || base == mname || base == iname || base == sname) {
      fs::remove(de.path(), ec);
      ++rc.temp_removed;
    }
  }

  std::set<SampleKey> kept_samples;
  std::vector<json> manifest;
  std::vector<std::string> unrecorded;  // whole files with samples the records lack
  std::vector<std::string> broken;      // files that are no whole data file: rolled back
  std::vector<std::string> kept_files;
  std::set<std::string> seen;  // every data file of the shard, by name
  int64_t last_kept = -1;      // the highest sequence number of a kept file
  for (const auto& [seq, name] : dataset_files(opt)) {
    rc.next_seq = std::max(rc.next_seq, seq + 1);
    seen.insert(name);
    const std::string path = opt.dir + "/" + name;
    DataFileInfo file = read_data_file(path, name);
    if (!file.config_hash.empty() && file.config_hash != model.config_hash)
      fail("dataset file ", path, " was made by model ", file.model, " (", file.config_hash,
           "), not by this run's ", model.name, " (", model.config_hash,
           "); write to another --tokens-out");
    std::vector<json>& entries = file.entries;
    std::string problem = file.problem;
    const bool whole = problem.empty();
    for (size_t i = 0; problem.empty() && i < entries.size(); ++i) {
      const json& e = entries[i];
      SampleKey key{id_text(e["id"]), e["sample"].get<uint64_t>()};
      auto it = recorded.find(key);
      Rows want{name, e["rows"][0].get<int64_t>(), e["rows"][1].get<int64_t>()};
      if (it == recorded.end() || !(it->second == want))
        problem = cat("sample ", e["sample"].get<uint64_t>(), " of job ", key.first,
                      " has no results record (the run stopped before writing it)");
    }
    if (!problem.empty()) {
      if (rc.first_problem.empty()) rc.first_problem = name + ": " + problem;
      ++rc.files_removed;
      if (whole) {
        unrecorded.push_back(path);  // removed below, once it is clear there is only one
        continue;
      }
      broken.push_back(path);
      continue;
    }
    ++rc.files_kept;
    kept_files.push_back(name);
    last_kept = seq;
    for (json& e : entries) {
      kept_samples.insert({id_text(e["id"]), e["sample"].get<uint64_t>()});
      rc.rows_kept += e["rows"][1].get<int64_t>() - e["rows"][0].get<int64_t>();
      manifest.push_back(std::move(e));
    }
  }
  // Data before index: a stopped run leaves at most one whole file whose records it did not
  // write. More are files whose records are in another results file: never rolled back.
  LOOM_CHECK(unrecorded.size() <= 1, "--resume: ", unrecorded.size(), " data files of ", opt.dir,
             " have samples with no record in ", results_path, " (", rc.first_problem,
             "); a stopped run leaves at most one, so these are another results file's: resume "
             "with the --out that made them, or pass --overwrite to start over");
  // Records whose files are gone: a rollback killed between removing its file and dropping its
  // records leaves one, the last; more, or one before a kept file, were moved or deleted, and
  // dropping their records would lose those samples for good.
  std::set<std::string> lost;
  for (const auto& [key, where] : recorded)
    if (!seen.count(where.file)) lost.insert(where.file);
  const bool only_last = lost.size() == 1 && data_file_seq(opt, *lost.begin()) > last_kept;
  LOOM_CHECK(lost.empty() || only_last, "--resume: ", lost.size(), " data files named by the ",
             "records of ", results_path, " are missing from --tokens-out ", opt.dir, " (",
             *lost.begin(), (lost.size() > 1 ? ", ..." : ""),
             "; moved or deleted?): restore them, resume with the --tokens-out that holds "
             "them, or pass --overwrite to start over");
  for (const std::string& path : broken) {
    fs::remove(path, ec);
    LOOM_CHECK(!ec, "cannot remove the incomplete dataset file ", path, ": ", ec.message());
  }
  for (const std::string& path : unrecorded) {
    fs::remove(path, ec);
    LOOM_CHECK(!ec, "cannot remove the incomplete dataset file ", path, ": ", ec.message());
  }
  rc.samples_kept = int64_t(kept_samples.size());
  for (const auto& [key, where] : recorded) {
    if (!kept_samples.count(key) && rc.first_problem.empty())
      rc.first_problem = cat(where.file, ": missing, named by the record of job ", key.first,
                             " sample ", key.second);
  }
  if (fs::exists(results_path, ec))
    rc.records_dropped = drop_records(results_path, kept_samples, recorded);
  sync_dir(parent_dir(results_path));
  if (rc.files_removed > 0) sync_dir(opt.dir);

  // The kept files' checksums as written at their commit; a file from loom 0.5.0 or before
  // has none, and gets one now.
  const std::string sums_path = dataset_sums_path(opt);
  const Sums read = read_sums(sums_path);
  LOOM_CHECK(read.problems.empty(), "--resume: ", sums_path, " ",
             read.problems.empty() ? std::string() : read.problems[0],
             "; restore it, or remove it to have the data files hashed as they are now");
  std::error_code sums_ec;
  const bool had_sums = fs::exists(sums_path, sums_ec);
  std::string text;
  for (const std::string& name : kept_files) {
    auto it = read.sums.find(name);
    if (it == read.sums.end() && had_sums && rc.unsummed.empty()) rc.unsummed = name;
    text += cat(it != read.sums.end() ? it->second : sha256_file(opt.dir + "/" + name), "  ", name,
                "\n");
  }
  write_file_atomic(dataset_sums_path(opt), text);
  text.clear();
  for (const json& e : manifest)
    text += e.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  write_file_atomic(dataset_manifest_path(opt), text);
  write_dataset_info(opt, model, rc.files_kept, rc.samples_kept, rc.rows_kept, "running");
  return rc;
}

void remove_dataset_shard(const DatasetOptions& opt) {
  std::error_code ec;
  for (const auto& [seq, name] : dataset_files(opt)) {
    fs::remove(opt.dir + "/" + name, ec);
    LOOM_CHECK(!ec, "--overwrite: cannot remove ", opt.dir, "/", name, ": ", ec.message());
  }
  for (const std::string& p :
       {dataset_manifest_path(opt), dataset_sums_path(opt), dataset_info_path(opt)}) {
    fs::remove(p, ec);
    LOOM_CHECK(!ec, "--overwrite: cannot remove ", p, ": ", ec.message());
  }
}

}  // namespace loom
