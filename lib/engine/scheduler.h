// Scheduler: continuous batching over running sequences (design §1, §5). Each step it gives
// every running sequence in the decode phase its pending slots (1, or A+1 after a frame),
// then fills the rest of the per-step slot budget with prefill chunks, in admission order.
// Sequences join (admit) and leave (complete) between steps. Admission reserves a round's
// worth of KV blocks up front (engine/kv_cache.h), so nothing is ever preempted.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "engine/kv_cache.h"
#include "engine/sequence.h"

namespace loom {

struct SchedulerOptions {
  int max_seqs = 256;          // sequences in one step
  int max_batch_slots = 2048;  // slots in one step (prefill chunks are cut to fit)
  bool prefix_sharing = true;  // share full prompt blocks between identical prefixes
};

struct Running {
  std::unique_ptr<Sequence> seq;
  std::vector<int32_t> blocks;   // block table of the current round
  std::vector<uint64_t> hashes;  // [full prompt blocks] chained content hashes of this round
  int reserved = 0;              // blocks reserved at admission
  int shared = 0;                // leading blocks taken from the prefix cache (this round)
  bool waiting_shared = false;   // shares blocks another sequence has not written yet
  int scheduled = 0;             // slots in the step being built
  double t_read = 0, t_admit = 0, t_first = -1, t_frame = 0;  // seconds (steady clock)
  std::vector<double> frame_s;                                // seconds per generated frame
};

struct SchedulerStats {
  int64_t steps = 0, slots = 0, seq_steps = 0;  // seq_steps / steps = mean batch size
  int max_batch = 0;
  int64_t shared_blocks = 0;  // prompt blocks taken from the prefix cache
  int64_t prefill_saved = 0;  // prompt slots not recomputed thanks to them
  int64_t prompt_blocks = 0;  // full prompt blocks over all rounds and sequences
  int64_t attn_pairs = 0;     // (query slot, visible cache slot) pairs: attention FLOPs
  int64_t kv_reads = 0;       // cache slots a step's attention reads, summed per sequence
  int64_t sampled = 0;        // slots whose logits were computed (lm_head rows)
};

class Scheduler {
 public:
  Scheduler(const ModelSpec& spec, KvCache& cache, SchedulerOptions options);

  int blocks_for(const Sequence& seq) const;  // blocks a sequence reserves
  bool can_admit(const Sequence& seq) const;
  void admit(std::unique_ptr<Sequence> seq, double now, double read_at);
  bool idle() const { return running_.empty(); }
  int running() const { return int(running_.size()); }

  // Builds the next step; false when nothing can run.
  bool schedule(StepBatch& batch);
  bool step_has_prefill() const { return has_prefill_; }
  // Applies a step's sampled tokens; moves finished sequences to `done`.
  void complete(const StepOutput& out, double now, std::vector<Running>& done);
  // The sequences of the last scheduled step in batch order (logits hooks).
  const std::vector<const Sequence*>& last_step_sequences() const { return step_seqs_; }
  void abandon_all(std::vector<Running>& dropped);  // releases every running sequence

  const SchedulerStats& stats() const { return stats_; }

 private:
  void begin_round(Running& r);  // hash the prompt, take shared blocks
  void release_blocks(Running& r);
  bool shared_ready(Running& r) const;

  ModelSpec spec_;
  KvCache& cache_;
  SchedulerOptions opt_;
  std::vector<Running> running_;
  std::vector<int> step_order_;  // indices into running_ of the step being run
  std::vector<const Sequence*> step_seqs_;
  bool has_prefill_ = false;
  SchedulerStats stats_;
};

}  // namespace loom
