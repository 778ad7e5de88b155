#include "engine/sequence.h"

#include <algorithm>

#include "backend/backend.h"
#include "core/error.h"

namespace loom {

Sequence::Sequence(std::shared_ptr<const Job> job, uint32_t sample, const ModelSpec& spec)
    : job_(std::move(job)), sample_(sample), spec_(spec) {
  if (spec_.has_frames()) {
    P_ = spec_.image_tokens;
    A_ = spec_.action_tokens;
    S_ = spec_.frame_slots();
    T_ = spec_.temporal_rows;
    const int total_frames = job_->context_frames + job_->num_frames;
    max_round_slots_ = std::min(T_, total_frames) * S_;
    // A prompt that already fills the temporal table starts from its last `overlap` frames,
    // exactly as a full round does before its next frame.
    const int n_ctx = job_->context_frames;
    if (n_ctx == T_)
      start_round(n_ctx - job_->overlap, job_->overlap);
    else
      start_round(0, n_ctx);
  } else {
    tokens_ = job_->prompt;
    action_rows_.assign(tokens_.size(), -1);
    prompt_len_ = round_len();
    prompt_slots_ = prompt_len_;
    max_round_slots_ = prompt_len_ + job_->max_tokens;
  }
}

const float* Sequence::action_at(int slot) const {
  const int row = action_rows_[size_t(slot)];
  return row < 0 ? nullptr : job_->actions.data() + size_t(row) * size_t(spec_.action_dim);
}

const int32_t* Sequence::frame_tokens(int frame) const {
  if (frame < job_->context_frames) return job_->prompt.data() + size_t(frame) * size_t(S_);
  return frames_[size_t(frame - job_->context_frames)].data();
}

void Sequence::push_slot(int32_t token, int action_row) {
  tokens_.push_back(token);
  action_rows_.push_back(action_row);
}

void Sequence::push_actions(int frame) {
  const Job& j = *job_;
  for (int a = 0; a < A_; a++) {
    if (spec_.action_projection != ActionProjection::Tokens)
      push_slot(kActionSlot, frame * A_ + a);
    else if (frame < j.context_frames)
      push_slot(j.prompt[size_t(frame) * size_t(S_) + size_t(P_ + a)], -1);
    else
      push_slot(j.action_ids[size_t(frame - j.context_frames) * size_t(A_) + size_t(a)], -1);
  }
}

void Sequence::start_round(int first_frame, int frame_count) {
  tokens_.clear();
  action_rows_.clear();
  kv_len_ = 0;
  for (int f = first_frame; f < first_frame + frame_count; f++) {
    const int32_t* ids = frame_tokens(f);
    for (int t = 0; t < P_; t++) push_slot(ids[t], -1);
    push_actions(f);
  }
  round_frames_ = frame_count;
  prompt_len_ = round_len();
  prompt_slots_ += prompt_len_;
}

void Sequence::advance(int n) {
  LOOM_CHECK(n >= 0 && n <= pending(), "sequence: advancing ", n, " of ", pending(), " pending");
  kv_len_ += n;
}

void Sequence::skip_prompt(int n, bool count) {
  LOOM_CHECK(kv_len_ == 0 && n <= prompt_len_ && n < round_len(), "sequence: cannot skip ", n,
             " prompt slots");
  kv_len_ = n;
  if (count) cached_slots_ += n;
}

bool Sequence::draws_blind() const {
  return spec_.has_frames() || spec_.eos_id < 0 || job_->ignore_eos;
}

bool Sequence::on_token(int32_t token) {
  LOOM_CHECK(!finished_ && pending() == 0 && !undrawn_, "sequence: token fed while ",
             finished_  ? "finished"
             : undrawn_ ? "the last one is undrawn"
                        : "slots are pending");
  LOOM_CHECK(token >= 0 || (token == kUndrawn && draws_blind()), "sequence: token ", token,
             " fed to ", draws_blind() ? "a sequence" : "a sequence that may stop at EOS");
  undrawn_ = token == kUndrawn;
  draw_index_++;
  if (!spec_.has_frames()) {
    generated_.push_back(token);
    eos_ = spec_.is_eos(token) && !job_->ignore_eos;
    if (eos_ || int(generated_.size()) == job_->max_tokens) {
      finished_ = true;
      return false;
    }
    push_slot(token, -1);
    return false;
  }
  current_.push_back(token);
  if (int(current_.size()) < P_) {
    push_slot(token, -1);
    return false;
  }
  // The frame is complete.
  frames_.push_back(std::move(current_));
  current_.clear();
  round_frames_++;
  if (int(frames_.size()) == job_->num_frames) {
    finished_ = true;
    return false;
  }
  const int frame = job_->context_frames + int(frames_.size()) - 1;  // global index of it
  if (round_frames_ == T_) {
    const int overlap = job_->overlap;
    start_round(frame + 1 - overlap, overlap);
    round_++;
    return true;
  }
  push_slot(token, -1);
  push_actions(frame);
  return false;
}

// The undrawn token is the last of the generated ids (plain models), of the frame being made
// or of the last frame (frame models); unless the sequence has finished it is also a slot
// among the round's last A + 1 (fed next, or the last frame's token in a new round's prompt).
void Sequence::resolve(int32_t token) {
  LOOM_CHECK(undrawn_ && token >= 0, "sequence: resolving ", token,
             undrawn_ ? "" : " with no undrawn token");
  undrawn_ = false;
  auto fill_last = [&](std::vector<int32_t>& v, size_t within) {
    for (size_t i = v.size(); i-- > 0 && v.size() - i <= within;)
      if (v[i] == kUndrawn) {
        v[i] = token;
        return true;
      }
    return false;
  };
  const bool kept = !spec_.has_frames() ? fill_last(generated_, 1)
                    : !current_.empty() ? fill_last(current_, 1)
                                        : fill_last(frames_.back(), 1);
  const bool fed = fill_last(tokens_, size_t(A_) + 1);
  LOOM_CHECK(kept && (fed || finished_), "sequence: the undrawn token was not where expected");
}

}  // namespace loom
