// Resuming an interrupted run (design §8, issue 5 §1). scan_results() reads the results file a
// previous run appended to and tells which samples are already written, so `--resume` runs
// only the rest and appends. A run killed mid-write leaves at most one torn last line (results
// are written one line per fwrite + fflush); it is cut off here so the appended records start
// on a line of their own. A malformed line anywhere else is not ours to guess about: it is an
// error naming the line.
//
// Records are kept by the job line they answer, with a 64-bit hash of their id (job_ids.h), not
// the id: a line is what identifies a job within one jobs file (a refused duplicate id shares
// its id with an earlier line), and the run checks each line it reads against the records
// (match_line), so resuming with another jobs file is refused instead of appending to foreign
// records. That check works on a stream (--jobs -): it needs no second pass over the jobs.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom {

struct ResumeState {
  std::string path;
  bool existed = false;       // false: no results file yet (a resume of nothing runs all)
  int64_t ok_records = 0;     // complete "ok" records kept
  int64_t error_records = 0;  // complete "error" records kept
  int64_t dropped_bytes = 0;  // torn tail cut off the file (0 when it ended cleanly)
  int64_t dropped_line = 0;   // 1-based line number of the torn line, 0 if none

  // True when an "ok" record for (job line, sample) is in the file.
  bool done(int64_t line, uint32_t sample) const;
  // True when the job line has an "error" record (bad input: rerunning gives the same error).
  bool failed(int64_t line) const;
  // done || failed: what a resumed run should not run again.
  bool skip(int64_t line, uint32_t sample) const { return done(line, sample) || failed(line); }

  // The run calls this for every job line it reads (its shard's lines, job or error alike,
  // with the id the record would carry: "line-N" when the line has none it could read, and
  // the line's hash, Job::line_hash). Throws loom::Error when the file has records for `line`
  // under another id, or made from another text of the line (where its records carry the
  // line's hash; an older loom's do not, and are not checked for it).
  void match_line(int64_t line, const std::string& id, uint64_t line_hash = 0);
  // At the end of the jobs (not when stopped early): throws loom::Error when records answer a
  // line match_line never saw. `jobs_path` names the jobs file in the message ("-": stdin).
  void check_all_matched(const std::string& jobs_path) const;

  struct LineRecords {
    uint64_t id_hash = 0;
    uint64_t line_hash = 0;         // the job line's text (its records' "line_hash"; 0: none)
    uint64_t offset = 0;            // byte offset of its first record (to quote its id)
    std::vector<uint32_t> samples;  // "ok" samples written
    bool failed = false;            // an "error" record answers the line
    bool matched = false;           // match_line saw the line
  };
  std::unordered_map<int64_t, LineRecords> lines;  // job line → its records
};

// Reads `path` (it may not exist), truncates a torn last line, and returns what is written.
// Throws loom::Error naming the file and line for a malformed record before the last line, a
// record without "id"/"status"/"line" (or "sample" when ok), records of one job line under two
// ids, or a path that cannot be read.
ResumeState scan_results(const std::string& path);

}  // namespace loom
