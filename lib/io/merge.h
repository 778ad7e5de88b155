// `loom merge` (design §11, issue 5 §4, issue 11 §7): joins the result files of N shards into
// one file in input order — by job line, then sample — byte for byte as the shards wrote them,
// so merging the shards of a run gives the same file as the unsharded run would have, up to
// timing. It refuses rather than guesses: a duplicate (id, sample), a torn or malformed line,
// inputs named `*.shard-K-of-N.*` that are not one whole set (every K of one N, once), and —
// given the jobs file — a job line with no record, a missing sample, or a record whose id or
// line does not match the jobs file are each a loom::Error naming what and where. With
// allow_partial, what is merely missing (shards, job lines, samples) is written as far as it
// goes and reported in MergeCounts instead; duplicates and malformed lines still fail.
//
// Ids are compared by their text (job_ids.h): 8 and "8" are the same id. A refused duplicate
// (the run turned a later line with an earlier line's id into an error record) is not a
// duplicate here; two lines with ok records under one id are.
// Memory: 56 bytes per record (a 64-bit id hash, line, sample, where its bytes are); records
// are copied, not held, and ids are read back only to settle a hash match or for a message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

struct MissingJob {
  int64_t line = 0;              // job line in the jobs file
  std::string id;                // its id
  std::vector<int64_t> samples;  // the samples missing; empty: the job has no record at all
};

struct MergeCounts {
  int64_t files = 0;    // inputs read
  int64_t records = 0;  // records written
  int64_t ok = 0;       // "ok" records (one per sample)
  int64_t errors = 0;   // "error" records (one per failed job)
  int64_t jobs = 0;     // job lines in the jobs file (0 when not given)

  // What is missing (only with allow_partial; without it, any of these is a loom::Error).
  int shard_count = 0;                    // N of the `*.shard-K-of-N.*` inputs; 0: none so named
  int64_t missing_shard_count = 0;        // K in [0, N) with no input
  std::vector<int> missing_shards;        // the first kListedShards of them, ascending
  int64_t missing_jobs = 0;               // job lines with no record (needs the jobs file)
  int64_t incomplete_jobs = 0;            // job lines with some of their samples
  int64_t unfinished_files = 0;           // inputs whose side file's state is not "complete"
  std::string first_unfinished;           // the first of them, with its state
  std::vector<MissingJob> first_missing;  // the first kListedMissing of both, by line
  static constexpr size_t kListedMissing = 5;
  static constexpr size_t kListedShards = 100;

  bool complete() const {
    return missing_shard_count == 0 && missing_jobs == 0 && incomplete_jobs == 0 &&
           unfinished_files == 0;
  }
};

struct MergeOptions {
  bool allow_partial = false;  // write what there is; MergeCounts tells what is missing
  uint64_t (*id_hash)(std::string_view id) = nullptr;  // tests: force collisions (job_ids.h)
};

// `jobs_path` may be empty (no completeness check of job lines); `out_path` "-" writes stdout,
// otherwise the file is written beside itself and renamed into place, so a failed merge leaves
// nothing. Where an input has a side file (`<input>.loom.json`, sidecar.h), the inputs must
// have been made by one model with the same options but the shard, and be finished (state
// "complete"; with allow_partial an unfinished one is counted instead). out_path must not be
// an input, the jobs file or an input's side file (an existing one is replaced: the CLI asks
// check_file_output first).
MergeCounts merge_results(const std::vector<std::string>& inputs, const std::string& jobs_path,
                          const std::string& out_path, const MergeOptions& options = {});

// One line on what a partial merge lacks, e.g. `missing shard 3 of 4; 5 jobs without records
// (job id "j3" (line 4), ...)`; "" when complete().
std::string merge_missing_summary(const MergeCounts& counts);

}  // namespace loom
