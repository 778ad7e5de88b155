// Engine: jobs in, results out (design §1). It pulls jobs from a source as capacity allows
// (jobs are streamed, never all read), expands each into num_samples sequences, runs the
// scheduler and the backend step by step, and hands each finished sample (or job error) to
// the sink as soon as it is known.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/scheduler.h"
#include "io/jobs.h"
#include "io/results.h"

namespace loom {

// Next job or job error; returns false at end of input.
using JobSource = std::function<bool(Job& job, JobError& error, bool& ok)>;
using ResultSink = std::function<void(const JobResult& result)>;
// Which samples of a job still need running (resume); default: all.
using SampleFilter = std::function<bool(const Job& job, uint32_t sample)>;
// Sees the last-slot logits of every token drawn (golden tests, debugging).
using LogitsHook = std::function<void(const Sequence& seq, const float* logits, int vocab)>;

struct EngineOptions {
  SchedulerOptions scheduler;
  CacheRequest cache;
  int lookahead_jobs = 0;  // jobs read ahead of admission (0: 2 × max_seqs)
  // Stage step N + 1 on the host while step N runs on the device (Scheduler::launch), where
  // no draw of step N decides what step N + 1 holds (frame models, plain models without EOS).
  bool pipeline = true;
  LogitsHook on_logits;
  SampleFilter keep_sample;
  const std::atomic<bool>* stop = nullptr;  // set by a signal: stop after the current step
  // Whether the source can give its next job without waiting for input (null: always). When
  // not, the engine reads on only once nothing else is left to do: jobs already read run while
  // a pipe's writer is still producing.
  std::function<bool()> input_ready;
  // Whether a source that returned false only paused (no job now, input not ended; null:
  // never): the engine runs what it has and reads on later.
  std::function<bool()> input_paused;
  std::function<void(const struct RunStats&)> on_start;     // KV pool allocated, before step 1
  std::function<void(const struct RunStats&)> on_progress;  // after every step
};

// A distribution of times (per frame, per sample) in bounded memory: exact count, sum and max,
// and a uniform sample of at most kCapacity values for percentiles (exact while the run has
// fewer values than that), so a million-job run keeps flat host memory.
class FrameTimes {
 public:
  static constexpr size_t kCapacity = 1 << 16;
  void add(double s);
  int64_t count() const { return count_; }
  double mean() const { return count_ ? sum_ / double(count_) : 0; }
  double max() const { return max_; }
  double percentile(double q) const;  // q in [0, 1]; 0 when empty

 private:
  std::vector<double> sample_;
  int64_t count_ = 0;
  double sum_ = 0, max_ = 0;
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;  // fixed seed: the same run keeps the same sample
};

struct RunStats {
  int64_t jobs_read = 0, jobs_ok = 0, jobs_failed = 0, samples_done = 0, samples_skipped = 0;
  int64_t samples_abandoned = 0;          // read but not written when a stop was asked for
  int64_t samples_abandoned_started = 0;  // of those, the ones running (the rest waited)
  int64_t jobs_failed_earlier = 0;        // --resume: lines an earlier run's error records answer
                                          // (in jobs_read, not in jobs_failed; set by the caller)
  int64_t samples_read = 0;               // samples of the accepted jobs (skipped ones included)
  int64_t frames_read = 0;                // frames those samples are to generate
  int64_t frames_skipped = 0;             // frames of the skipped samples (resume)
  int64_t tokens = 0, frames = 0;         // generated (tokens as sampled, in-flight ones included)
  int64_t tokens_written = 0;             // tokens of the finished samples (what the results hold)
  double wall_s = 0;  // the run from its first job on: tokens_per_s divides by this
  double pool_s = 0;  // allocating the KV pool, before wall_s's clock starts
  // Step time by kind: only prefill chunks, only decode slots (one token, or a frame's A+1
  // chunk), or both in one step (continuous batching mixes them).
  double prefill_s = 0, decode_s = 0, mixed_s = 0;
  int64_t prefill_steps = 0, decode_steps = 0, mixed_steps = 0;
  SchedulerStats scheduler;
  int kv_blocks = 0, block_size = 0, kv_peak_blocks = 0;
  size_t kv_block_bytes = 0;
  FrameTimes frame_s;  // every generated frame's time (all samples)
  FrameTimes ttft_s;   // per sample: job read → first token (queue + prefill)
  FrameTimes tpot_s;   // per sample: first → last token, over the tokens after the first
  FrameTimes queue_s;  // per sample: job read → admission
  bool stopped = false;

  double step_s() const { return prefill_s + decode_s + mixed_s; }
};

class Engine {
 public:
  Engine(const ModelSpec& spec, Backend& backend, EngineOptions options);
  RunStats run(const JobSource& source, const ResultSink& sink);

 private:
  ModelSpec spec_;
  Backend& backend_;
  EngineOptions opt_;
};

}  // namespace loom
