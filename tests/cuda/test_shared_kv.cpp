// Decode steps whose sequences share cache blocks (prefix sharing) through the CUDA backend
// (StepLayout::shared_kv, AttentionArgs::tma_shared_kv): on a random model with head_dim 64
// and 4 kv heads (the TMA decode kernel's; 256 sequences are 1,024 pairs, past one wave of its
// 2-stage bf16 blocks, so shared blocks take one stage a warp), batch-invariant GEMMs, 256
// sequences at contexts 600..699 with and without groups of 8 holding the same blocks for
// their first 592 keys (576 at blocks of 64: whole blocks only), at blocks of 16 and of 64 (the
// cuda default). Each batch runs whole (eagerly, then from its graph) and as two halves
// of 128 (512 pairs: 2-stage blocks, one wave): the same logit bits and tokens every way, and
// the steps counted as sharing are exactly the shared batches', all of them with group blocks
// (StepLayout::group_kv: the 592 shared keys are most of each context; the whole batch's
// decode runs them, 4 sequences of a kv head a block reading their prefix once).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "tiny_spec.h"

using namespace loom;
using namespace loom::test;

namespace {

constexpr int kSeqs = 256, kSlotsPerSeq = 768, kShared = 592;

// Sequences first .. first + n - 1 of kSeqs at contexts 600..699, on blocks of bs slots; with
// `shared`, groups of 8 hold their first sequence's blocks for the whole blocks of their first
// kShared keys.
StepBatch batch(int first, int n, bool shared, int bs) {
  const int per_seq = kSlotsPerSeq / bs;
  StepBatch b;
  b.clear();
  b.blocks_per_seq = per_seq;
  for (int s = first; s < first + n; s++) {
    const int ctx = 600 + (s * 13) % 100;
    b.tokens.push_back((s * 7919 + 13) % 5003);
    b.positions.push_back(ctx);
    b.slot_start.push_back(b.slot_start.back() + 1);
    b.kv_len.push_back(ctx);
    const int lead = shared ? s - s % 8 : s;
    for (int j = 0; j < per_seq; j++)
      b.block_tables.push_back((j < kShared / bs ? lead : s) * per_seq + j);
    b.sample.push_back(1);
    b.sampling.push_back(SamplingParams{s % 2 ? 0.8f : 0.0f, 0, 1.0f, uint64_t(s + 1)});
    b.sample_index.push_back(0);
    b.draw_index.push_back(0);
  }
  b.want_logits = true;
  return b;
}

}  // namespace

TEST_CASE("sequences sharing blocks: one stage a warp, the bits of two half batches") {
  for (int bs : {16, 64}) {
    CAPTURE(bs);
    auto be = make_cuda_backend(ComputeDType::BF16, 0, /*batch_invariant=*/true);
    ModelSpec spec = long_spec();
    spec.kv_heads = 4;  // (8 heads of 64: G = 2)
    cuda_load_random_weights(*be, spec, 7);
    CacheRequest cr;
    cr.block_size = bs;
    cr.num_blocks = kSeqs * (kSlotsPerSeq / bs);
    REQUIRE(be->allocate_cache(cr) == cr.num_blocks);
    cuda_fill_cache_random(*be, 11);
    int64_t shared_steps = 0;
    for (bool shared : {false, true}) {
      CAPTURE(shared);
      std::vector<StepOutput> whole(2);
      for (StepOutput& o : whole) be->step(batch(0, kSeqs, shared, bs), o);  // eagerly, then graph
      StepOutput lo, hi;
      be->step(batch(0, kSeqs / 2, shared, bs), lo);
      be->step(batch(kSeqs / 2, kSeqs / 2, shared, bs), hi);
      shared_steps += shared ? 4 : 0;
      const size_t half = lo.logits.size();
      REQUIRE(whole[0].logits.size() == 2 * half);
      for (const StepOutput& o : whole) {
        CHECK(std::memcmp(o.logits.data(), lo.logits.data(), half * sizeof(float)) == 0);
        CHECK(std::memcmp(o.logits.data() + half, hi.logits.data(), half * sizeof(float)) == 0);
        CHECK(std::equal(lo.tokens.begin(), lo.tokens.end(), o.tokens.begin()));
        CHECK(std::equal(hi.tokens.begin(), hi.tokens.end(), o.tokens.begin() + kSeqs / 2));
      }
      CHECK(cuda_shared_kv_steps(*be) == shared_steps);
      CHECK(cuda_group_kv_steps(*be) == shared_steps);  // the prefix is most of every context
    }
  }
}
