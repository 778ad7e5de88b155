// Shared prefixes read once a block (backend/cuda/shared_plan.h, the TMA decode kernel's pair
// plan) through the CUDA backend: on a random model with head_dim 64 (the TMA kernel's), 256
// sequences in groups of 8 holding the same blocks for their first 592 keys (9 whole tiles),
// a decode step and a step where sequence 0 feeds 3 slots (3 one-slot tiles
// of one sequence), each run without the plan, then with it, each twice (eagerly, then from
// its graph): the same logit bits and tokens every time, and the plan ran on exactly the steps
// it was on for.
#include <doctest/doctest.h>

#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "tiny_spec.h"

using namespace loom;
using namespace loom::test;

namespace {

constexpr int kSeqs = 256, kPerSeq = 48, kBs = 16, kShared = 592;

// kSeqs sequences at contexts 600..699, sequence 0 with `first_slots` new slots; groups of 8
// hold their first sequence's blocks for their first kShared keys.
StepBatch batch(int first_slots) {
  StepBatch b;
  b.clear();
  b.blocks_per_seq = kPerSeq;
  for (int s = 0; s < kSeqs; s++) {
    const int ctx = 600 + (s * 13) % 100, n = s == 0 ? first_slots : 1;
    for (int j = 0; j < n; j++) {
      b.tokens.push_back((s * 7919 + 13 * j + 13) % 5003);
      b.positions.push_back(ctx + j);
    }
    b.slot_start.push_back(b.slot_start.back() + n);
    b.kv_len.push_back(ctx);
    const int lead = s - s % 8;
    for (int j = 0; j < kPerSeq; j++)
      b.block_tables.push_back((j < kShared / kBs ? lead : s) * kPerSeq + j);
    b.sample.push_back(1);
    b.sampling.push_back(SamplingParams{s % 2 ? 0.8f : 0.0f, 0, 1.0f, uint64_t(s + 1)});
    b.sample_index.push_back(0);
    b.draw_index.push_back(0);
  }
  b.want_logits = true;
  return b;
}

}  // namespace

TEST_CASE("shared-prefix plan: the same logits and tokens as every tile reading its own") {
  auto be = make_cuda_backend(ComputeDType::BF16, 0);
  cuda_load_random_weights(*be, long_spec(), 7);
  CacheRequest cr;
  cr.block_size = kBs;
  cr.num_blocks = kSeqs * kPerSeq;
  REQUIRE(be->allocate_cache(cr) == cr.num_blocks);
  cuda_fill_cache_random(*be, 11);
  int64_t plan_steps = 0;
  for (int first_slots : {1, 3}) {
    CAPTURE(first_slots);
    const StepBatch b = batch(first_slots);
    std::vector<StepOutput> outs;
    for (bool plan : {false, true}) {
      cuda_set_shared_plan(*be, plan);
      for (int rep = 0; rep < 2; rep++) {  // eagerly (capturing), then the graph
        StepOutput o;
        be->step(b, o);
        outs.push_back(std::move(o));
        plan_steps += plan;
      }
    }
    for (size_t i = 1; i < outs.size(); i++) {
      CAPTURE(i);
      CHECK(outs[i].tokens == outs[0].tokens);
      CHECK(std::memcmp(outs[i].logits.data(), outs[0].logits.data(),
                        outs[0].logits.size() * sizeof(float)) == 0);
    }
  }
  CHECK(cuda_shared_plan_steps(*be) == plan_steps);
  cuda_set_shared_plan(*be, false);
}
