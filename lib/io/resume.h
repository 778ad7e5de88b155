// Resuming an interrupted run (design §8, issue 5 §1). scan_results() reads the results file a
// previous run appended to and tells which samples are already written, so `--resume` runs
// only the rest and appends. A run killed mid-write leaves at most one torn last line (results
// are written one line per fwrite + fflush); it is cut off here so the appended records start
// on a line of their own. A malformed line anywhere else is not ours to guess about: it is an
// error naming the line.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace loom {

struct ResumeState {
  std::string path;
  bool existed = false;       // false: no results file yet (a resume of nothing runs all)
  int64_t ok_records = 0;     // complete "ok" records kept
  int64_t error_records = 0;  // complete "error" records kept
  int64_t dropped_bytes = 0;  // torn tail cut off the file (0 when it ended cleanly)
  int64_t dropped_line = 0;   // 1-based line number of the torn line, 0 if none

  // True when an "ok" record for (id, sample) is in the file.
  bool done(const std::string& id, uint32_t sample) const;
  // True when the job has an "error" record (bad input: rerunning gives the same error).
  bool failed(const std::string& id) const;
  // done(id, sample) || failed(id): what a resumed run should not run again.
  bool skip(const std::string& id, uint32_t sample) const { return done(id, sample) || failed(id); }

  std::unordered_map<std::string, std::vector<uint32_t>> ok_samples;  // id → samples written
  std::unordered_set<std::string> error_ids;
};

// Reads `path` (it may not exist), truncates a torn last line, and returns what is written.
// Throws loom::Error naming the file and line for a malformed record before the last line, a
// record without "id"/"status" (or "sample" when ok), or a path that cannot be read.
ResumeState scan_results(const std::string& path);

}  // namespace loom
