// Progress on stderr (issue 5): on a terminal a live line rewritten in place; otherwise (logs,
// Slurm) one plain line every `interval` seconds. Quiet mode prints nothing.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine.h"

namespace loom {

class Progress {
 public:
  Progress(int64_t total_jobs, double interval_s, bool quiet);  // total_jobs < 0: unknown
  void update(const RunStats& st, bool force = false);
  void finish();  // ends the live line

 private:
  int64_t total_;
  double interval_, last_ = -1e9;
  bool quiet_, tty_, drawn_ = false;
};

// Lines of a file that hold something (jobs), counted in one streaming pass; -1 for stdin.
int64_t count_job_lines(const std::string& path);

}  // namespace loom
