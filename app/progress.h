// Progress of a run on stderr (issue 5, issue 14 §2), through app/log.h: on a terminal a live
// line rewritten in place; otherwise a line 2 s after the engine starts (so a log shows within
// seconds that the run is alive), then every `interval` seconds, and a last one at the end.
// A thread of its own prints them, so a long step (a CPU prefill of a large model) does not
// delay them; the engine only hands it counts after each step.
//
// Progress and ETA count samples and frames against the totals known so far: a regular jobs
// file is pre-counted on another thread (JobCounter: jobs, samples, frames of this shard's
// lines, read cheaply with simdjson on-demand), a stream only counts what was read. A job
// that fails leaves the totals (its samples will never be done).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace loom {

// The shortest --progress-interval (seconds): shorter ones are refused, not raised.
constexpr double kMinProgressInterval_s = 0.1;

// Pre-count of a regular jobs file, on its own thread; inert for stdin, pipes and FIFOs.
class JobCounter {
 public:
  JobCounter(const std::string& path, int shard_index, int shard_count);
  ~JobCounter();  // stops the count and joins
  JobCounter(const JobCounter&) = delete;
  JobCounter& operator=(const JobCounter&) = delete;

  struct Totals {
    int64_t jobs = 0, samples = 0, frames = 0;  // samples: num_samples; frames: × num_frames
    bool counting = false;                      // a regular file is being or was counted
    bool done = false;                          // the whole file is counted
  };
  Totals totals() const;
  // Job line `line` failed: its samples and frames leave the totals.
  void forget(int64_t line);

 private:
  void count(std::string path, int shard_index, int shard_count);
  struct Line {
    uint32_t samples = 0, frames = 0;
  };
  mutable std::mutex mu_;
  Totals totals_;
  std::vector<Line> lines_;           // [physical line - 1] of this shard's lines
  std::set<int64_t> forget_pending_;  // failed before the count reached them
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

class Progress {
 public:
  // counter: the jobs file's pre-count (may count nothing). interval_s: between lines in a log.
  // tokens_per_frame: P of a frame model (frames count as their tokens are drawn, not only when
  // a sample ends, so 256 long jobs in flight do not show 0% for minutes); 0 for plain models.
  Progress(const JobCounter& counter, double interval_s, int tokens_per_frame);
  ~Progress();
  void start();                     // the engine is about to run its first step
  void update(const RunStats& st);  // after a step: keeps the counts for the next line
  void finish(const RunStats& st);  // the last line (and the end of a live line)

 private:
  struct Counts {
    int64_t jobs_read = 0, jobs_failed = 0, samples_done = 0, frames_done = 0;
    int64_t samples_read = 0, frames_read = 0, tokens = 0, frames = 0;  // frames: generated
    double wall_s = 0;
  };
  Counts counts_of(const RunStats& st) const;
  void loop();
  void print(const Counts& c, bool last);

  const JobCounter& counter_;
  double interval_;
  int tokens_per_frame_;
  std::mutex mu_;
  std::condition_variable wake_;
  Counts counts_;
  bool stop_ = false;
  std::thread thread_;
};

// The job errors of a run for the end-of-run summary: errors grouped by kind (the message
// without its "line N: " prefix, digits masked, so "found 1000" and "found 1003" are one kind),
// each kind with its count and its first message. Bounded: past kMaxKinds kinds, new kinds are
// only counted.
class JobErrorSummary {
 public:
  static constexpr size_t kMaxKinds = 1000;
  void add(const std::string& message);
  int64_t total() const { return total_; }
  // Warning lines: how many jobs failed, then the first `shown` kinds in order of first
  // appearance, each with its count and first message.
  std::vector<std::string> lines(int64_t jobs_read, size_t shown = 5) const;

 private:
  struct Kind {
    std::string first;  // its first message, as written in the record
    int64_t count = 0;
  };
  std::map<std::string, size_t> index_;  // kind key → kinds_ index
  std::vector<Kind> kinds_;
  int64_t total_ = 0, uncounted_ = 0;  // uncounted_: errors of kinds past kMaxKinds
};

}  // namespace loom
