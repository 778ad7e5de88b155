// Scheduler: continuous batching over running sequences (design §1, §5). Each step it gives
// every running sequence in the decode phase its pending slots (1, or A+1 after a frame),
// then fills the rest of the per-step slot budget with prefill chunks, in admission order.
// Sequences join (admit) and leave (complete) between steps.
//
// KV blocks are taken as sequences grow. A sequence is admitted when its prompt fits with a
// block to spare for every running sequence that holds blocks (the watermark). When this
// step's decode slots need more blocks than are free, the youngest sequences are preempted:
// their KV is dropped and later recomputed (prefill of the round so far), as vLLM does. A
// preempted sequence resumes, and nothing new is admitted, until its whole round fits with
// the watermark to spare: the oldest sequences always progress, so nothing deadlocks, and a
// job never waits for KV it will only need at the end of its round (up-front reservation,
// the earlier policy, kept 41 of 256 Terra jobs out of an H100's pool for half the run).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "engine/kv_cache.h"
#include "engine/sequence.h"

namespace loom {

struct SchedulerOptions {
  int max_seqs = 256;  // sequences in one step
  // Slots in one step (prefill chunks are cut to fit). 8,192 (vLLM's offline engine takes
  // 8,192-16,384): a 256-job Terra run admits its prompts in ~55 steps instead of 2,048's ~233,
  // so its sequences decode together (H100 FP8 256 x 22: 251.4 -> 254.9 mean sequences a step,
  // 25,186 -> 25,413 tokens/s; bench/results/2026-12-07-h100-s70-ctest-prefill-ring-mbs.json).
  // The CUDA backend allocates such a step's activations (~69 KB a slot for Terra, by
  // arithmetic on its buffers) before its KV pool takes the rest of --gpu-memory-fraction.
  int max_batch_slots = 8192;
  bool prefix_sharing = true;  // share full prompt blocks between identical prefixes
};

struct Running {
  std::unique_ptr<Sequence> seq;
  std::vector<int32_t> blocks;   // block table of the current round
  std::vector<uint64_t> hashes;  // [full prompt blocks] chained content hashes of this round
  int shared = 0;                // leading blocks taken from the prefix cache (this round)
  bool needs_round = false;      // holds no blocks: begin_round before it runs (new round or
                                 // preempted)
  bool preempted = false;        // its next begin_round is a resume (not a new prompt)
  bool waiting_shared = false;   // shares blocks another sequence has not written yet
  int scheduled = 0;             // slots in the step being built
  int batch_index = -1;          // its sequence index in the last step it was scheduled in
  double t_read = 0, t_admit = 0, t_first = -1, t_frame = 0;  // seconds (steady clock)
  double t_done = 0;                                          // when it finished
  std::vector<double> frame_s;                                // seconds per generated frame
};

struct SchedulerStats {
  int64_t steps = 0, slots = 0, seq_steps = 0;  // seq_steps / steps = mean batch size
  int max_batch = 0;
  int max_slots = 0;          // the largest step in slots (≤ max_batch_slots)
  int64_t shared_blocks = 0;  // prompt blocks taken from the prefix cache
  int64_t prefill_saved = 0;  // prompt slots not recomputed thanks to them
  int64_t prompt_blocks = 0;  // full prompt blocks over all rounds and sequences
  int64_t attn_pairs = 0;     // (query slot, visible cache slot) pairs: attention FLOPs
  int64_t kv_reads = 0;       // cache slots a step's attention reads, summed per sequence
  int64_t kv_reads_once = 0;  // the same with each block counted once a step: what attention
                              // must read at least when a group's shared blocks are read once
  int64_t sampled = 0;        // slots whose logits were computed (lm_head rows)
  int64_t preemptions = 0;    // sequences whose KV was dropped for lack of blocks
  int64_t recomputed = 0;     // slots prefilled again after a preemption
};

class Scheduler {
 public:
  Scheduler(const ModelSpec& spec, KvCache& cache, SchedulerOptions options);

  int blocks_for(const Sequence& seq) const;  // blocks a sequence's longest round needs
  bool can_admit(const Sequence& seq) const;
  void admit(std::unique_ptr<Sequence> seq, double now, double read_at);
  bool idle() const { return running_.empty(); }
  int running() const { return int(running_.size()); }

  // A step's life: schedule() builds it, launch() records that it was submitted to the
  // backend, complete() applies its tokens. Steps may be pipelined (Engine): once a blind step
  // is launched, its sequences look as if their tokens were drawn (Sequence::kUndrawn, fed to
  // the next step as future_token), so the next step can be scheduled and submitted before
  // this one completes. At most one launched step awaits complete() when the next is built.
  bool schedule(StepBatch& batch);  // false when nothing can run
  bool step_has_prefill() const { return has_prefill_; }
  bool step_has_decode() const { return has_decode_; }
  bool step_blind() const { return blind_; }  // no draw of the step decides what follows
  void launch(bool blind);                    // blind: only when step_blind()
  // Applies the oldest launched step's tokens; moves finished sequences to `done`.
  void complete(const StepOutput& out, double now, std::vector<Running>& done);
  // The sequences of the last scheduled step in batch order (logits hooks).
  const std::vector<const Sequence*>& last_step_sequences() const { return step_seqs_; }
  void abandon_all(std::vector<Running>& dropped);  // releases every running sequence

  const SchedulerStats& stats() const { return stats_; }

 private:
  void begin_round(Running& r);  // hash the prompt, take shared blocks
  void release_blocks(Running& r);
  bool shared_ready(Running& r) const;
  bool preemptible(const Running& r) const;  // drops no block another sequence waits on
  void preempt(Running& r);
  bool choose_step();              // step_order_ and the slots of each; false when none can run
  bool preempt_youngest_holder();  // of two or more sequences holding blocks
  bool feed(Running& r, int32_t token);  // on_token; drops a finished round's blocks

  // A launched step: per sequence in batch order, its index in running_, whether it draws,
  // and (blind steps) whether the provisional draw completed a frame.
  struct Launched {
    struct Entry {
      int index = 0;
      bool draws = false, new_frame = false;
    };
    std::vector<Entry> entries;
    bool blind = false;
  };

  ModelSpec spec_;
  KvCache& cache_;
  SchedulerOptions opt_;
  std::vector<Running> running_;
  std::vector<int> step_order_;        // indices into running_ of the step being built
  std::vector<Launched> launched_;     // launched and not completed, oldest first
  std::vector<int64_t> read_in_step_;  // [blocks] the last step that read the block (kv_reads_once)
  std::vector<const Sequence*> step_seqs_;
  bool has_prefill_ = false, has_decode_ = false, blind_ = false;
  SchedulerStats stats_;
};

}  // namespace loom
