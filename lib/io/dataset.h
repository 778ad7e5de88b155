// The token dataset (`--tokens-out DIR`, issue 11 §4 and §6). Samples are packed, in
// completion order, into safetensors files of many samples each; a manifest is the index.
//
//   DIR/data-000000[.shard-K-of-N].safetensors   one file per commit (≤ --samples-per-file
//                                                samples, ≤ 256 MiB, ≤ --file-seconds old)
//     tokens           I32 [rows, P]          frame models: generated frames, samples back
//                                             to back (plain models: [n] tokens)
//     sample_offsets   I64 [samples + 1]      sample i is rows [o[i], o[i+1]) of tokens
//     actions          F32 [rows, A, adim]    the action rows that follow each frame (the
//                                             job's; NaN where the job gave none: last frame)
//     context          I32 [crows, P]         the prompt's context frames (plain: prompt ids)
//     context_offsets  I64 [samples + 1]
//     context_actions  F32 [crows, A, adim]
//     action_ids / context_action_ids  I32 [rows, A] / [crows, A]   in place of actions /
//                                      context_actions for models whose actions are vocab
//                                      ids (-1 where the job gave none: last frame)
//     __metadata__     format "loom-dataset", schema, shard, model, loom_version, draw_stream
//                      (core/philox.h kDrawStream), and "manifest": the
//                      manifest lines of its samples as a JSON array (a file describes itself);
//                      "provenance": the run's provenance block as JSON text (io/provenance.h)
//   DIR/manifest[.shard-K-of-N].jsonl   one line per sample: id, sample, line, file, rows,
//                                       num_frames, context_frames, seed, sampling, model,
//                                       config_hash, loom_version
//   DIR/dataset[.shard-K-of-N].json     schema, model, vocabulary, P, A, action_dim, shard,
//                                       totals (files, samples, rows), state, loom_version,
//                                       draw_stream, provenance
//   DIR/SHA256SUMS[.shard-K-of-N]       "<sha256>  <file>" a data file, as `sha256sum`
//                                       writes it (core/sha256.h); `loom verify` checks them
// `loom merge --dataset DIR` (merge_dataset) joins the shards' manifests into manifest.jsonl
// and dataset.json once every shard is complete; the data files stay where they are.
//
// Commit order, data before index: the data file is written under a temporary name, synced,
// renamed and its folder synced; then its checksum line and its manifest lines are appended
// and synced; then
// dataset.json is replaced; only then does the caller write the results records that name the
// file. A kill at any instant leaves either a whole file with every record or a file whose
// samples `reconcile_dataset` rolls back and the resumed run makes again.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/results.h"
#include "model/spec.h"

namespace loom {

constexpr uint64_t kDatasetFileBytes = uint64_t(256) << 20;  // a file closes at this size
constexpr int kDatasetSchema = 1;

struct DatasetOptions {
  std::string dir;
  int shard_index = 0, shard_count = 1;
  int64_t samples_per_file = 0;  // 0: as many as fit in kDatasetFileBytes
  double file_seconds = 60;      // a file open this long closes at the next chance
  bool actions = true;           // store actions / context_actions
  bool context = true;           // store context / context_offsets (and their actions)
  std::string results;           // the results file its records go to (same_path_form; "-": stdout)
};

struct DatasetModel {
  std::string name;          // "LlamaActionForCausalLM:/data/terra"
  std::string architecture;  // config.json architectures[0]
  std::string config_hash;   // model fingerprint (model/fingerprint.h)
  ModelSpec spec;
  // What the run's tokens depend on (the side file's identity less the shard and the folder):
  // dataset.json's "run_identity", the same in every shard of one run.
  nlohmann::ordered_json identity;
};

// "DIR/manifest.jsonl" for an unsharded run, "DIR/manifest.shard-K-of-N.jsonl" for a shard.
std::string dataset_manifest_path(const DatasetOptions& o);
std::string dataset_info_path(const DatasetOptions& o);  // dataset[.shard-K-of-N].json
std::string dataset_lock_path(const DatasetOptions& o);  // dataset[.shard-K-of-N].lock
std::string dataset_sums_path(const DatasetOptions& o);  // SHA256SUMS[.shard-K-of-N]
// The results file this shard's dataset.json names ("results"); "" when it names none (no
// file yet, or one written before loom recorded it).
std::string dataset_results_path(const DatasetOptions& o);
// The sequence number of a data file name of this shard ("data-000012.safetensors" → 12), or
// -1 for any other name (another shard's, a temporary file, ...).
int64_t data_file_seq(const DatasetOptions& o, const std::string& name);
// Data files of this shard in DIR, sorted by sequence number, as (seq, file name).
std::vector<std::pair<int64_t, std::string>> dataset_files(const DatasetOptions& o);

struct DatasetReconcile {
  int64_t next_seq = 0;  // the first free file number of this shard
  int64_t files_kept = 0, files_removed = 0, temp_removed = 0;
  int64_t samples_kept = 0, rows_kept = 0;
  int64_t records_dropped = 0;  // results records removed: their data was not whole
  std::string first_problem;    // why the first removal happened, for the resume line
  // A kept file with no line in an existing SHA256SUMS (lost, or edited): hashed as it is now,
  // which no longer shows a change made before. "" when every kept file had its line.
  std::string unsummed;
};

class DatasetWriter {
 public:
  // Continues after `resumed` (what reconcile_dataset kept; zero for a new dataset).
  DatasetWriter(DatasetOptions opt, DatasetModel model, const DatasetReconcile& resumed);
  // Adds an ok result (r.job set) finished at `now_s`; held in memory until the file commits.
  void add(const JobResult& r, double now_s);
  // Whether the open file should commit now (sample count, size or age reached).
  bool due(double now_s) const;
  bool empty() const { return pending_.empty(); }
  // Writes the open file and its index (see the header comment) and returns the added
  // results, in order, with tokens_file and rows set. Throws loom::Error naming the file.
  std::vector<JobResult> commit();
  // Rewrites dataset.json with the final state ("complete" or "stopped").
  // `extra`: keys added to dataset.json (the run's jobs_read).
  void finish(const std::string& state, const nlohmann::ordered_json& extra = {});

 private:
  DatasetOptions opt_;
  DatasetModel model_;
  int64_t seq_;
  std::vector<JobResult> pending_;
  uint64_t pending_bytes_ = 0;
  double opened_s_ = 0;                         // when the first pending sample arrived
  int64_t files_ = 0, samples_ = 0, rows_ = 0;  // committed totals, dataset.json
};

// `--resume` with `--tokens-out`: checks every data file of this shard (complete, readable,
// its own manifest) against the "ok" records of the results file that name them. A file is
// kept when whole and every sample in it has its record with the same rows; otherwise it is
// removed and so are its records (rewriting the results file), and those samples run again.
// Records that name a missing file are dropped too. Stale temporary files are removed; the
// manifest is rebuilt from the files kept, their checksums kept (computed for a file that has
// none: one written by loom 0.5.0 or before), and dataset.json is rewritten. Checksums are not
// re-read here (that reads the whole dataset): `loom verify` does.
DatasetReconcile reconcile_dataset(const DatasetOptions& opt, const DatasetModel& model,
                                   const std::string& results_path);

// Writes DIR/dataset[.shard-K-of-N].json (atomically) with these totals and the run's state:
// "running" while loom writes it, "complete" when every job of the shard is done, "stopped"
// after SIGINT/SIGTERM (merge --dataset refuses shards that are not complete). `extra`: keys
// added (a finished run's jobs_read).
void write_dataset_info(const DatasetOptions& o, const DatasetModel& m, int64_t files,
                        int64_t samples, int64_t rows, const std::string& state,
                        const nlohmann::ordered_json& extra = {});

// A new dataset (shard): its manifest and checksums, empty, then dataset.json "running" with no
// files, so a shard given no jobs is an empty shard to merge and verify, not a missing one.
void start_dataset(const DatasetOptions& o, const DatasetModel& m);

// Removes this shard's data files, manifest, checksums and dataset.json (--overwrite).
void remove_dataset_shard(const DatasetOptions& opt);

struct DatasetMerge {
  int shard_count = 0;
  std::vector<int> merged, missing, unfinished;  // shard indices
  int64_t files = 0, samples = 0, rows = 0;
};

// Joins DIR's dataset.shard-K-of-N.json and manifest.shard-K-of-N.jsonl into DIR/dataset.json
// and DIR/manifest.jsonl (atomically). Refuses shards of different N or models, a sample in
// two shards, a manifest line naming a missing file, and — unless allow_partial — a missing
// or unfinished shard. Memory: a 64-bit hash per sample.
// Holds every shard's lock (dataset_lock_path) while it reads and writes, so no shard run
// changes the folder under a merge; no_lock skips them (file systems without fcntl locks).
DatasetMerge merge_dataset(const std::string& dir, bool allow_partial, bool no_lock = false);

// `loom verify DIR`: whether a dataset folder is whole and unchanged since loom wrote it.
struct DatasetVerify {
  std::vector<std::string> indexes;  // dataset.json files checked (the merged one, or shards')
  int64_t files = 0, samples = 0, rows = 0;
  uint64_t bytes = 0;                 // data bytes read and hashed
  int64_t checksummed = 0;            // files whose SHA-256 matched SHA256SUMS
  std::vector<std::string> problems;  // "<file>: <what is wrong>", in a stable order
  std::vector<std::string> notes;     // not wrong, but worth saying (checksums not recorded)
};

// Checks, without changing anything: every index (the merged dataset.json + manifest.jsonl, or
// each shard's) says "complete" and its totals match its manifest; no sample is listed twice;
// every data file a manifest names exists, is whole, was made by the index's model, and
// describes itself (its __metadata__ manifest) exactly as the folder's manifest does; every
// data file's SHA-256 equals its SHA256SUMS line; no data file, temporary file or checksum line
// is left outside the index. Files are hashed on `threads` threads. Throws loom::Error only
// when `dir` is no dataset folder at all.
DatasetVerify verify_dataset(const std::string& dir, int threads);

}  // namespace loom
