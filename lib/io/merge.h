// `loom merge` (design §11, issue 5 §4): joins the result files of N shards into one file in
// input order — by job line, then sample — byte for byte as the shards wrote them, so merging
// the shards of a run gives the same file as the unsharded run would have, up to timing.
// It refuses rather than guesses: a duplicate (id, sample), a torn or malformed line, and —
// given the jobs file — a job line with no record, a missing sample, or a record whose id or
// line does not match the jobs file are each a loom::Error naming what and where.
// Memory: an index of (line, sample, file, offset) per record; records are copied, not held.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

struct MergeCounts {
  int64_t files = 0;    // inputs read
  int64_t records = 0;  // records written
  int64_t ok = 0;       // "ok" records (one per sample)
  int64_t errors = 0;   // "error" records (one per failed job)
  int64_t jobs = 0;     // job lines in the jobs file (0 when not given)
};

// `jobs_path` may be empty (no completeness check); `out_path` "-" writes stdout, otherwise
// the file is written beside itself and renamed into place, so a failed merge leaves nothing.
MergeCounts merge_results(const std::vector<std::string>& inputs, const std::string& jobs_path,
                          const std::string& out_path);

}  // namespace loom
