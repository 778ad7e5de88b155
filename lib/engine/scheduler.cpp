#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace loom {

Scheduler::Scheduler(const ModelSpec& spec, KvCache& cache, SchedulerOptions options)
    : spec_(spec), cache_(cache), opt_(options) {
  LOOM_CHECK(opt_.max_seqs > 0 && opt_.max_batch_slots > 0, "scheduler: max_seqs ", opt_.max_seqs,
             " and max_batch_slots ", opt_.max_batch_slots, " must be positive");
}

int Scheduler::blocks_for(const Sequence& seq) const {
  const int bs = cache_.block_size();
  return (seq.max_round_slots() + bs - 1) / bs;
}

bool Scheduler::can_admit(const Sequence& seq) const {
  if (int(running_.size()) >= opt_.max_seqs) return false;
  int holders = 0;
  for (const Running& r : running_) {
    if (r.needs_round) return false;  // resumes and new rounds go first
    holders += r.blocks.empty() ? 0 : 1;
  }
  const int bs = cache_.block_size();
  return (seq.round_len() + bs - 1) / bs + holders <= cache_.free_blocks();
}

void Scheduler::admit(std::unique_ptr<Sequence> seq, double now, double read_at) {
  Running r;
  r.seq = std::move(seq);
  r.t_read = read_at;
  r.t_admit = r.t_frame = now;
  begin_round(r);
  running_.push_back(std::move(r));
}

void Scheduler::begin_round(Running& r) {
  const Sequence& s = *r.seq;
  LOOM_CHECK(!s.undrawn(), "scheduler: a round's prompt hashed before its last token is drawn");
  const int bs = cache_.block_size(), full = s.prompt_len() / bs;
  const bool resume = r.preempted;
  r.needs_round = r.preempted = false;
  r.shared = 0;
  r.hashes.clear();
  uint64_t h = 0;
  for (int b = 0; b < full; b++) {
    std::vector<float> acts;  // [bs, action_dim] action values of the block's action slots
    if (spec_.action_dim > 0) {
      acts.assign(size_t(bs) * size_t(spec_.action_dim), 0.0f);
      for (int i = 0; i < bs; i++)
        if (const float* a = s.action_at(b * bs + i))
          std::copy(a, a + spec_.action_dim, acts.begin() + long(i) * spec_.action_dim);
    }
    h = hash_block(h, s.round_tokens().data() + size_t(b) * size_t(bs),
                   acts.empty() ? nullptr : acts.data(), bs, spec_.action_dim);
    r.hashes.push_back(h);
  }
  if (!resume) stats_.prompt_blocks += full;
  // Share at most the blocks before the round's last known slot: its logits are needed.
  const int shareable = std::min(full, (s.round_len() - 1) / bs);
  int matched = 0;
  while (opt_.prefix_sharing && matched < shareable) {
    const int b = cache_.lookup(r.hashes[size_t(matched)]);
    if (b < 0) break;
    cache_.add_ref(b);
    r.blocks.push_back(b);
    matched++;
  }
  if (matched > 0) {
    r.seq->skip_prompt(matched * bs, !resume);
    r.shared = matched;
    r.waiting_shared = true;
    if (!resume) {
      stats_.shared_blocks += matched;
      stats_.prefill_saved += int64_t(matched) * bs;
    }
  }
  if (resume) stats_.recomputed += s.round_len() - matched * bs;
  // Claim and name the rest of the full prompt blocks now, so sequences admitted before this
  // one has run (the other samples, jobs read in the same batch) can already share them.
  while (int(r.blocks.size()) < full) {
    const int b = cache_.allocate();
    cache_.register_hash(b, r.hashes[r.blocks.size()]);
    r.blocks.push_back(b);
  }
}

void Scheduler::release_blocks(Running& r) {
  for (int32_t b : r.blocks) cache_.release(b);
  r.blocks.clear();
}

bool Scheduler::shared_ready(Running& r) const {
  if (!r.waiting_shared) return true;
  // Only the blocks taken from the prefix cache: the rest of the prompt's blocks are this
  // sequence's to write (with a partial match, waiting for them would wait forever).
  for (int i = 0; i < r.shared; i++)
    if (!cache_.ready(r.blocks[size_t(i)])) return false;
  r.waiting_shared = false;
  return true;
}

bool Scheduler::preemptible(const Running& r) const {
  // (A sequence finished by a launched step leaves when that step completes.)
  if (r.needs_round || r.blocks.empty() || r.seq->finished()) return false;
  // Blocks this sequence writes that others already share must be written first.
  for (size_t b = size_t(r.shared); b < r.blocks.size(); b++)
    if (!cache_.ready(r.blocks[b]) && cache_.ref_count(r.blocks[b]) > 1) return false;
  return true;
}

void Scheduler::preempt(Running& r) {
  release_blocks(r);
  r.seq->preempt();
  r.needs_round = r.preempted = true;
  r.waiting_shared = false;
  stats_.preemptions++;
}

bool Scheduler::preempt_youngest_holder() {
  int holders = 0;
  for (const Running& r : running_) holders += r.blocks.empty() ? 0 : 1;
  if (holders < 2) return false;
  for (size_t i = running_.size(); i-- > 0;) {
    if (!preemptible(running_[i])) continue;
    preempt(running_[i]);
    return true;
  }
  return false;
}

bool Scheduler::choose_step() {
  step_order_.clear();
  step_seqs_.clear();
  has_prefill_ = has_decode_ = false;
  blind_ = true;
  const int decode_max = spec_.action_tokens + 1;
  const int bs = cache_.block_size();
  int budget = opt_.max_batch_slots;
  for (Running& r : running_) r.scheduled = 0;
  auto decoding = [&](const Running& r) {
    const Sequence& s = *r.seq;
    return !r.needs_round && s.kv_len() >= s.prompt_len() && s.pending() <= decode_max;
  };
  auto new_blocks = [&](const Running& r, int n) {  // blocks to allocate to feed n more slots
    return std::max(0, (r.seq->kv_len() + n + bs - 1) / bs - int(r.blocks.size()));
  };
  // This step's decode slots must find blocks: preempt the youngest sequences until they do.
  int demand = 0;
  for (const Running& r : running_)
    if (decoding(r)) demand += new_blocks(r, r.seq->pending());
  for (size_t i = running_.size(); i-- > 0 && demand > cache_.free_blocks();) {
    Running& r = running_[i];
    if (!preemptible(r)) continue;
    if (decoding(r)) demand -= new_blocks(r, r.seq->pending());
    preempt(r);
  }
  // Decode-phase sequences first (they hold KV and finish soonest), then prefill chunks (and
  // sequences starting a round or resuming, when their whole round fits with the watermark).
  int free_left = cache_.free_blocks();
  int holders = 0;  // the watermark: running sequences that hold blocks
  for (const Running& r : running_) holders += r.blocks.empty() ? 0 : 1;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < running_.size(); i++) {
      Running& r = running_[i];
      const Sequence& s = *r.seq;
      bool began = false;
      if (r.needs_round) {
        if (pass == 0 || s.undrawn()) continue;  // a new round's prompt hashes its tokens
        if ((s.round_len() + bs - 1) / bs + holders > free_left) continue;
        const int before = cache_.free_blocks();
        begin_round(r);
        free_left -= before - cache_.free_blocks();
        holders += r.blocks.empty() ? 0 : 1;
        // A round whose prompt the prefix cache holds but for its last slots is decoding at
        // once: it runs in this pass, or a step of only it would find nothing to run.
        began = true;
      }
      if (((pass == 0) != decoding(r) && !began) || r.scheduled > 0 || s.pending() == 0) continue;
      if (int(step_order_.size()) >= opt_.max_seqs || budget == 0) break;
      if (!shared_ready(r)) continue;
      int n = std::min(s.pending(), budget);
      if (pass == 0 && new_blocks(r, n) > free_left) continue;  // decode chunks are never cut
      if (new_blocks(r, n) > free_left)  // a prefill chunk is cut to the free blocks
        n = std::min(n, (int(r.blocks.size()) + free_left) * bs - s.kv_len());
      if (n <= 0) continue;
      r.scheduled = n;
      budget -= n;
      free_left -= new_blocks(r, n);
      step_order_.push_back(int(i));
      (decoding(r) ? has_decode_ : has_prefill_) = true;
    }
  }
  return !step_order_.empty();
}

bool Scheduler::schedule(StepBatch& batch) {
  batch.clear();
  bool any = choose_step();
  // Nothing can run and no step in flight will free blocks: the sequences holding blocks all
  // wait for more (prefill chunks cut to nothing: rounds began on free blocks that others'
  // growth then took, and only decode demand preempts above). The youngest holders give
  // theirs back until an older one runs, so the oldest always progresses. (At most one try a
  // sequence: one preempted may begin its round again in choose_step.)
  for (size_t tries = running_.size(); !any && launched_.empty() && tries > 0; --tries) {
    if (!preempt_youngest_holder()) break;
    any = choose_step();
  }
  if (!any) return false;
  const int bs = cache_.block_size();

  int max_blocks = 0;
  for (int i : step_order_) {
    Running& r = running_[size_t(i)];
    const int need = (r.seq->kv_len() + r.scheduled + bs - 1) / bs;
    while (int(r.blocks.size()) < need) r.blocks.push_back(cache_.allocate());
    max_blocks = std::max(max_blocks, int(r.blocks.size()));
  }

  const int ad = spec_.action_dim;
  batch.blocks_per_seq = max_blocks;
  read_in_step_.resize(size_t(cache_.num_blocks()), -1);
  for (int i : step_order_) {
    Running& r = running_[size_t(i)];
    const Sequence& s = *r.seq;
    for (int j = 0; j < r.scheduled; j++) {
      const int slot = s.kv_len() + j;
      const int32_t token = s.token_at(slot);  // undrawn: its last step's draw (launch)
      batch.tokens.push_back(token == Sequence::kUndrawn ? future_token(r.batch_index) : token);
      batch.positions.push_back(slot);
      const float* a = s.action_at(slot);
      for (int d = 0; d < ad; d++) batch.actions.push_back(a ? a[d] : 0.0f);
    }
    batch.slot_start.push_back(int32_t(batch.tokens.size()));
    batch.kv_len.push_back(s.kv_len());
    const int64_t n = r.scheduled, kv = s.kv_len();
    stats_.attn_pairs += n * kv + n * (n + 1) / 2;
    stats_.kv_reads += kv + n;
    // Blocks another sequence shares are counted by the first sequence of the step to read
    // them. Only the round's full prompt blocks (registered under their hashes) can be shared:
    // blocks taken as the sequence grows are its own, so those are counted without a look.
    stats_.kv_reads_once += kv + n;
    const int64_t shareable = std::min<int64_t>(int64_t(r.hashes.size()), (kv + n + bs - 1) / bs);
    for (int64_t j = 0; j < shareable; j++) {
      const int blk = r.blocks[size_t(j)];
      if (cache_.ref_count(blk) <= 1) continue;
      if (read_in_step_[size_t(blk)] == stats_.steps)
        stats_.kv_reads_once -= std::min<int64_t>(bs, kv + n - j * bs);
      read_in_step_[size_t(blk)] = stats_.steps;
    }
    r.batch_index = batch.n_seqs() - 1;
    if (r.scheduled == s.pending()) blind_ = blind_ && s.draws_blind();
    stats_.sampled += r.scheduled == s.pending() ? 1 : 0;
    const size_t bt0 = batch.block_tables.size();
    batch.block_tables.resize(bt0 + size_t(max_blocks), -1);
    std::copy(r.blocks.begin(), r.blocks.end(), batch.block_tables.begin() + long(bt0));
    batch.sample.push_back(r.scheduled == s.pending() ? 1 : 0);
    batch.sampling.push_back(s.job().sampling);
    batch.sample_index.push_back(s.sample());
    batch.draw_index.push_back(s.draw_index());
    step_seqs_.push_back(&s);
  }
  stats_.steps++;
  stats_.slots += batch.n_slots();
  stats_.seq_steps += batch.n_seqs();
  stats_.max_batch = std::max(stats_.max_batch, batch.n_seqs());
  stats_.max_slots = std::max(stats_.max_slots, batch.n_slots());
  return true;
}

bool Scheduler::feed(Running& r, int32_t token) {
  const size_t frames_before = r.seq->frames().size();
  if (r.seq->on_token(token)) {  // the next schedule() starts the round when its prompt fits
    release_blocks(r);
    r.needs_round = true;
  }
  return r.seq->frames().size() > frames_before;
}

void Scheduler::launch(bool blind) {
  LOOM_CHECK(!blind || blind_, "scheduler: launching a step blind that decides on a draw");
  const int bs = cache_.block_size();
  Launched step;
  step.blind = blind;
  for (int i : step_order_) {
    Running& r = running_[size_t(i)];
    Sequence& s = *r.seq;
    const int before = s.kv_len();
    s.advance(r.scheduled);
    // Ready for sharing now: a step that reads these blocks runs after this one on the device.
    for (int b = before / bs; b < s.kv_len() / bs; b++) cache_.set_ready(r.blocks[size_t(b)]);
    r.scheduled = 0;
    Launched::Entry e;
    e.index = i;
    e.draws = s.pending() == 0;  // (a prefill chunk draws no token)
    if (e.draws && blind) e.new_frame = feed(r, Sequence::kUndrawn);
    step.entries.push_back(e);
  }
  step_order_.clear();
  launched_.push_back(std::move(step));
}

void Scheduler::complete(const StepOutput& out, double now, std::vector<Running>& done) {
  LOOM_CHECK(!launched_.empty(), "scheduler: complete without a launched step");
  const Launched step = std::move(launched_.front());
  launched_.erase(launched_.begin());
  LOOM_CHECK(out.tokens.size() == step.entries.size(), "scheduler: ", out.tokens.size(),
             " tokens for a step of ", step.entries.size(), " sequences");
  for (size_t k = 0; k < step.entries.size(); k++) {
    const Launched::Entry& e = step.entries[k];
    if (!e.draws) continue;
    Running& r = running_[size_t(e.index)];
    bool new_frame = e.new_frame;
    if (step.blind)
      r.seq->resolve(out.tokens[k]);
    else
      new_frame = feed(r, out.tokens[k]);
    if (r.t_first < 0) r.t_first = now;
    if (new_frame) {
      r.frame_s.push_back(now - r.t_frame);
      r.t_frame = now;
    }
    if (r.seq->finished()) r.t_done = now;
  }
  // Finished sequences leave; the order of the others is kept, and so are the indices of the
  // steps built or launched since.
  std::vector<int> moved_to(running_.size());
  size_t w = 0;
  for (size_t i = 0; i < running_.size(); i++) {
    moved_to[i] = -1;
    if (running_[i].seq->finished()) {
      release_blocks(running_[i]);
      done.push_back(std::move(running_[i]));
    } else {
      if (w != i) running_[w] = std::move(running_[i]);
      moved_to[i] = int(w++);
    }
  }
  if (w == running_.size()) return;
  running_.resize(w);
  auto remap = [&](int& i) {
    i = moved_to[size_t(i)];
    LOOM_CHECK(i >= 0, "scheduler: a finished sequence is in a later step");
  };
  for (int& i : step_order_) remap(i);
  for (Launched& l : launched_)
    for (Launched::Entry& e : l.entries) remap(e.index);
}

void Scheduler::abandon_all(std::vector<Running>& dropped) {
  for (Running& r : running_) {
    release_blocks(r);
    dropped.push_back(std::move(r));
  }
  running_.clear();
}

}  // namespace loom
