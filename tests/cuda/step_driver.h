// Hand-built step batches for driving backends side by side (tests/cuda): a prompt chunk,
// frame chunks of last token + action slots, single-slot decodes that cross block boundaries
// (blocks of 16 slots unless given; graph replays), n_seqs sequences together with greedy / seeded
// / top-k+top-p draws. Every backend gets the same batches, fed the reference's (backends[0])
// draws: teacher forcing, so the others' logits are compared on the same inputs.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "cuda_test_util.h"
#include "model/mapping.h"

namespace loom::test {

struct StepCounts {
  int steps = 0, decode_steps = 0, chunk_steps = 0;
};

// check(it, batch, outs): outs[i] is backends[i]'s output (logits always filled).
inline StepCounts drive_steps(
    const ModelSpec& spec, const std::vector<Backend*>& backends, int n_seqs, int num_blocks,
    const std::function<void(int, const StepBatch&, std::vector<StepOutput>&)>& check,
    int n_modes = 3, int block_size = 16) {
  const int bs = block_size;
  struct Seq {
    std::vector<int32_t> blocks;
    int pos = 0;  // slots cached so far (= kv_len)
    uint64_t draws = 0;
    int32_t next = 0;  // next token to feed
    SamplingParams sp;
    bool done = false;
  };
  const int S = spec.has_frames() ? spec.frame_slots() : 0;
  const int P = spec.image_tokens;
  const int max_pos = spec.has_frames() ? S * spec.temporal_rows : spec.max_positions;
  std::mt19937 g(5);
  std::vector<Seq> seqs(static_cast<size_t>(n_seqs));
  const SamplingParams modes[3] = {{0.0f, 0, 1.0f, 0},    // greedy
                                   {0.9f, 0, 1.0f, 11},   // seeded
                                   {1.1f, 20, 0.8f, 3}};  // top-k + top-p
  const int firsts[3] = {spec.has_frames() ? 2 * S : 21, spec.has_frames() ? S : 9, 5};
  // n_modes 2: greedy and seeded only (no filtered draws).
  for (int s = 0; s < n_seqs; s++) seqs[size_t(s)].sp = modes[s % n_modes];
  int next_block = 0;
  auto is_action = [&](int p) { return S > 0 && p % S >= P; };

  StepCounts c;
  for (int it = 0; it < 60; it++) {
    StepBatch b;
    b.blocks_per_seq = std::min(5, (max_pos + bs - 1) / bs);  // within the graphs' table width
    b.want_logits = true;
    std::vector<int> in_batch;
    for (int s = 0; s < n_seqs; s++) {
      Seq& q = seqs[size_t(s)];
      if (q.done) continue;
      // First step: a prompt chunk; then one token, or at a frame's last image token that
      // token plus the frame's action slots (the "7-slot chunk").
      int n = it == 0 ? firsts[s % 3] + s / 3 : 1;
      if (it > 0 && S > 0 && q.pos % S == P - 1) n = 1 + spec.action_tokens;
      if (q.pos + n > max_pos || q.pos + n > b.blocks_per_seq * bs) {
        q.done = true;
        continue;
      }
      in_batch.push_back(s);
      b.kv_len.push_back(q.pos);
      b.slot_start.push_back(b.n_slots());
      for (int j = 0; j < n; j++) {
        const int p = q.pos + j;
        if (is_action(p)) {
          b.tokens.push_back(kActionSlot);
          for (int d = 0; d < spec.action_dim; d++)
            b.actions.push_back(std::uniform_real_distribution<float>(-2, 2)(g));
        } else {
          b.tokens.push_back(it == 0 || j > 0 ? int32_t(g() % uint32_t(spec.vocab)) : q.next);
          for (int d = 0; d < spec.action_dim; d++) b.actions.push_back(0.0f);
        }
        b.positions.push_back(p);
      }
      while (int(q.blocks.size()) * bs < q.pos + n) q.blocks.push_back(next_block++);
      for (int j = 0; j < b.blocks_per_seq; j++)
        b.block_tables.push_back(j < int(q.blocks.size()) ? q.blocks[size_t(j)] : -1);
      // Draw only where the chunk ends on an image slot's predecessor (as the engine does).
      const bool draw = !is_action(q.pos + n);
      b.sample.push_back(draw ? 1 : 0);
      b.sampling.push_back(q.sp);
      b.sample_index.push_back(uint32_t(s));
      b.draw_index.push_back(q.draws);
    }
    if (in_batch.empty()) break;
    b.slot_start.push_back(b.n_slots());
    if (spec.action_projection == ActionProjection::None) b.actions.clear();
    REQUIRE(next_block <= num_blocks);
    bool all_single = true;
    for (size_t i = 0; i + 1 < b.slot_start.size(); i++)
      all_single &= b.slot_start[i + 1] - b.slot_start[i] == 1;
    (all_single ? c.decode_steps : c.chunk_steps)++;

    std::vector<StepOutput> outs(backends.size());
    for (size_t i = 0; i < backends.size(); i++) {
      outs[i].tokens.assign(7, 99);  // stale contents the step must replace
      outs[i].logits.assign(3, NAN);
      backends[i]->step(b, outs[i]);
    }
    CAPTURE(it);
    check(it, b, outs);
    const StepOutput& want = outs[0];
    for (size_t r = 0; r < in_batch.size(); r++) {
      Seq& q = seqs[size_t(in_batch[r])];
      q.pos += b.slot_start[r + 1] - b.slot_start[r];
      if (b.sample[r]) {
        q.next = want.tokens[r];
        q.draws++;
      }
    }
    c.steps++;
  }
  return c;
}

// The CPU backend and `gpu` (m's weights loaded into both here) on drive_steps' batches, checked
// at every step: each sequence's last-slot logits within `tol` of the CPU's (relative), the
// tokens equal where tol < 1e-3, -1 exactly where a sequence draws nothing. Also checks that the
// run had ≥ 20 steps, ≥ 10 decode steps and, for frame models, ≥ 3 chunk steps.
inline StepCounts compare_with_cpu(const LoadedModel& m, Backend& gpu, double tol, int n_seqs,
                                   int n_modes = 3, int block_size = 16) {
  const ModelSpec& spec = m.spec;
  auto cpu = make_cpu_backend();
  cpu->load(spec, m.weights);
  gpu.load(spec, m.weights);
  CacheRequest cr;
  cr.block_size = block_size;
  cr.num_blocks = 5 * n_seqs + 8;
  REQUIRE(cpu->allocate_cache(cr) >= cr.num_blocks);
  REQUIRE(gpu.allocate_cache(cr) == cr.num_blocks);
  const StepCounts c = drive_steps(
      spec, {cpu.get(), &gpu}, n_seqs, cr.num_blocks,
      [&](int, const StepBatch& b, std::vector<StepOutput>& outs) {
        const StepOutput &want = outs[0], &got = outs[1];
        REQUIRE(got.tokens.size() == want.tokens.size());
        REQUIRE(got.logits.size() == want.logits.size());
        for (int r = 0; r < b.n_seqs(); r++) {
          CAPTURE(r);
          const auto row = [&](const StepOutput& o) {
            return std::vector<float>(o.logits.begin() + long(r) * spec.vocab,
                                      o.logits.begin() + long(r + 1) * spec.vocab);
          };
          CHECK(rel_err(row(got), row(want)) < tol);
          if (tol < 1e-3) CHECK(got.tokens[size_t(r)] == want.tokens[size_t(r)]);
          if (b.sample[size_t(r)])
            CHECK(got.tokens[size_t(r)] >= 0);
          else
            CHECK(got.tokens[size_t(r)] == -1);
        }
      },
      n_modes, block_size);
  CHECK(c.steps >= 20);
  CHECK(c.decode_steps >= 10);
  if (spec.has_frames()) CHECK(c.chunk_steps >= 3);
  return c;
}

}  // namespace loom::test
