// Sequence: one sample of one job, and the frame loop of design §4.
//
// A round is a list of slots starting at position 0: the prompt (context frames, or the last
// `overlap` frames when a new round starts), then what generation appends. Each slot is a
// token id or an action row. kv_len() slots are in the KV cache; the rest are pending and go
// to the next step(s). When a step has fed every pending slot, the last slot's logits give the
// next token and on_token() extends the round:
//   - inside a frame: the token becomes the next pending slot;
//   - a frame's P-th token: if more frames follow and the round holds T frames, a new round
//     starts from the last `overlap` frames; otherwise the token and the frame's A action rows
//     become one (A+1)-slot chunk whose last logits give the next frame's first token.
// Action-token models (ActionProjection::Tokens) are the same loop with the frame's A action
// ids as ordinary token slots in place of the action rows: from the prompt for context frames,
// from job.action_ids for generated ones, and carried with their frames into a new round.
// Plain Llama (no frame layout) is the same machine with frames of unbounded size.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/jobs.h"
#include "model/spec.h"

namespace loom {

class Sequence {
 public:
  Sequence(std::shared_ptr<const Job> job, uint32_t sample, const ModelSpec& spec);

  const Job& job() const { return *job_; }
  const std::shared_ptr<const Job>& job_ptr() const { return job_; }
  uint32_t sample() const { return sample_; }
  bool finished() const { return finished_; }

  // The current round.
  int round() const { return round_; }
  int round_len() const { return int(tokens_.size()); }  // slots known so far
  int kv_len() const { return kv_len_; }
  int pending() const { return round_len() - kv_len_; }
  int32_t token_at(int slot) const { return tokens_[size_t(slot)]; }  // kActionSlot for actions
  const float* action_at(int slot) const;                             // [action_dim] or nullptr
  const std::vector<int32_t>& round_tokens() const { return tokens_; }
  int prompt_len() const { return prompt_len_; }  // slots of this round's prompt

  // Most slots this sequence's KV can hold in any round (a job larger than the pool fails).
  int max_round_slots() const { return max_round_slots_; }

  // Record that `n` pending slots were fed; kv_len grows by n.
  void advance(int n);
  // Feed the token drawn from the last slot's logits (only when pending() == 0).
  // Returns true when a new round starts: the caller drops this sequence's KV blocks.
  // token may be kUndrawn while the step that draws it is still running, when the sequence's
  // course does not depend on its value (draws_blind); resolve() then gives the value.
  bool on_token(int32_t token);
  static constexpr int32_t kUndrawn = INT32_MIN;  // (no future_token value, no token id)
  // True when no token value can change what follows (frames have a fixed length; a plain
  // model stops at max_tokens only): what the engine's step pipelining needs.
  bool draws_blind() const;
  bool undrawn() const { return undrawn_; }  // an on_token(kUndrawn) awaits resolve()
  void resolve(int32_t token);
  // Skip the first `n` prompt slots, whose KV is shared from identical earlier prompts
  // (counted in cached_slots() unless it is a resume after preemption).
  void skip_prompt(int n, bool count = true);
  // The KV of this round is dropped (preemption): every known slot of the round is pending
  // again and is recomputed; the tokens drawn so far and the draw index are kept.
  void preempt() { kv_len_ = 0; }

  uint64_t draw_index() const { return draw_index_; }
  const std::vector<std::vector<int32_t>>& frames() const { return frames_; }  // [frames][P]
  const std::vector<int32_t>& tokens() const { return generated_; }            // plain models
  bool stopped_at_eos() const { return eos_; }

  // Slots prefilled (all rounds) and how many of those came from shared blocks.
  int prompt_slots() const { return prompt_slots_; }
  int cached_slots() const { return cached_slots_; }

 private:
  void start_round(int first_frame, int frame_count);  // frames [first, first + count) as prompt
  const int32_t* frame_tokens(int frame) const;        // global frame index → [P] ids
  void push_slot(int32_t token, int action_row);
  void push_actions(int frame);  // the A action slots after global frame `frame`

  std::shared_ptr<const Job> job_;
  uint32_t sample_;
  ModelSpec spec_;
  int P_ = 0, A_ = 0, S_ = 0, T_ = 0;

  std::vector<int32_t> tokens_;       // [round_len] token id or kActionSlot
  std::vector<int32_t> action_rows_;  // [round_len] row of job.actions, -1 for token slots
  int kv_len_ = 0, prompt_len_ = 0, round_ = 0, round_frames_ = 0;
  int max_round_slots_ = 0;

  std::vector<std::vector<int32_t>> frames_;  // generated frames, [num_frames][P]
  std::vector<int32_t> current_;              // tokens of the frame being generated
  std::vector<int32_t> generated_;            // plain models: generated ids
  uint64_t draw_index_ = 0;
  bool finished_ = false, eos_ = false;
  bool undrawn_ = false;
  int prompt_slots_ = 0, cached_slots_ = 0;
};

}  // namespace loom
