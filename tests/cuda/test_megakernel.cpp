// The decode-step megakernel (kernels/mega, issue 15) through the CUDA backend:
//   1. on the tiny checkpoints, forced in f32, against the CPU backend on the step driver's
//      batches (1, 2 and 8 sequences, greedy and seeded draws, frame chunks and prompt chunks
//      on the graph path between): every decode step ran the megakernel, tokens identical,
//      logits within 1e-4; in bf16 within the backend's bf16 bound of 6e-2;
//   2. on a random model with contexts of 300–3,000 keys (partitions of 32-256 keys, several
//      per split, the fold in chunks), f32: the megakernel's logits equal the graph path's
//      within 2e-5 and its tokens are the same; bf16 at 1, 2, 4 and 8 sequences (the
//      tensor-core GEMVs at 4 and 8, and the dot loop there too) within 6e-2;
//   3. a bf16 step replayed 1,000 times with random sleeps at every wait and publish and the
//      SMs' programs handed out in random orders gives the same logit bits every time;
//   4. a schedule defect (a qkv unit dropped) fails the step with the counter's name after the
//      bounded wait instead of hanging, and the next step runs correctly again.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "model/mapping.h"
#include "step_driver.h"
#include "tiny_spec.h"

using namespace loom;
using namespace loom::test;

namespace {

const char* const kModels[] = {"tiny_v1", "tiny_v2", "tiny_llama"};

// Under compute-sanitizer a step runs ~100x slower: its runs lengthen the bounded wait.
MegakernelDebug sanitizer_timeout(MegakernelDebug dbg) {
  if (const char* s = std::getenv("LOOM_TEST_MEGA_TIMEOUT_S"))
    dbg.timeout_ns = uint64_t(std::atof(s) * 1e9);
  return dbg;
}

// The step driver's batches with greedy and seeded draws (no filter: the megakernel's draws).
void compare_with_cpu(const LoadedModel& m, ComputeDType dtype, double tol, int n_seqs) {
  auto gpu = make_cuda_backend(dtype, 0);
  cuda_set_megakernel(*gpu, MegakernelMode::Force);
  cuda_set_megakernel_debug(*gpu, sanitizer_timeout(MegakernelDebug{}));
  const StepCounts c = loom::test::compare_with_cpu(m, *gpu, tol, n_seqs, 2);
  // Every decode step (one slot per sequence) took the megakernel, nothing else did.
  CAPTURE(cuda_megakernel_refusal(*gpu));
  CHECK(cuda_megakernel_steps(*gpu) == c.decode_steps);
}

// One decode step of sequences at contexts ctx (long_spec's vocabulary), each on its own
// blocks_per_seq blocks, greedy and sampled rows alternating, draw index `draw`.
StepBatch decode_batch(const std::vector<int>& ctx, int blocks_per_seq, uint64_t draw) {
  StepBatch b;
  b.blocks_per_seq = blocks_per_seq;
  const int n = int(ctx.size());
  for (int s = 0; s < n; s++) {
    b.slot_start.push_back(s);
    b.tokens.push_back((s * 7919 + 13) % 5003);
    b.positions.push_back(ctx[size_t(s)]);
    b.kv_len.push_back(ctx[size_t(s)]);
    for (int j = 0; j < blocks_per_seq; j++) b.block_tables.push_back(s * blocks_per_seq + j);
    b.sample.push_back(1);
    b.sampling.push_back(SamplingParams{s % 2 ? 0.8f : 0.0f, 0, 1.0f, uint64_t(s + 1)});
    b.sample_index.push_back(uint32_t(s));
    b.draw_index.push_back(draw);
  }
  b.slot_start.push_back(n);
  b.want_logits = true;
  return b;
}

std::unique_ptr<Backend> random_backend(ComputeDType dtype, MegakernelMode mode, int blocks,
                                        int block_size = 16) {
  auto be = make_cuda_backend(dtype, 0);
  cuda_set_megakernel(*be, mode);
  cuda_load_random_weights(*be, long_spec(), 7);
  CacheRequest cr;
  cr.block_size = block_size;
  cr.num_blocks = blocks;
  REQUIRE(be->allocate_cache(cr) == blocks);
  cuda_fill_cache_random(*be, 11);
  return be;
}

// The megakernel (forced) against the graph path on long_spec's random weights, for each
// context list and each debug setting in turn, `steps` steps at contexts ctx + step (each step
// appends a key: the next one reads it): logits within tol and, in f32, the same tokens.
void compare_with_graph(ComputeDType dtype, const std::vector<std::vector<int>>& ctxs,
                        const std::vector<MegakernelDebug>& settings, int steps, double tol,
                        int block_size = 16) {
  const int per_seq = 4096 / block_size;
  for (const std::vector<int>& ctx : ctxs) {
    CAPTURE(ctx.size());
    const int blocks = int(ctx.size()) * per_seq;
    auto graph = random_backend(dtype, MegakernelMode::Off, blocks, block_size);
    auto mega = random_backend(dtype, MegakernelMode::Force, blocks, block_size);
    for (size_t k = 0; k < settings.size(); k++) {
      CAPTURE(k);
      cuda_set_megakernel_debug(*mega, sanitizer_timeout(settings[k]));
      for (int step = 0; step < steps; step++) {
        CAPTURE(step);
        std::vector<int> at = ctx;
        for (int& c : at) c += step;
        const StepBatch b = decode_batch(at, per_seq, uint64_t(step));
        StepOutput want, got;
        graph->step(b, want);
        mega->step(b, got);
        CHECK(rel_err(got.logits, want.logits) < tol);
        if (dtype == ComputeDType::F32) CHECK(got.tokens == want.tokens);
      }
    }
    CHECK(cuda_megakernel_steps(*mega) == int(settings.size()) * steps);
    CHECK(cuda_megakernel_steps(*graph) == 0);
  }
}

}  // namespace

TEST_CASE("f32 megakernel equals the CPU backend step by step") {
  for (const char* name : kModels)
    for (int n : {1, 2, 8}) {
      CAPTURE(name);
      CAPTURE(n);
      compare_with_cpu(load_model(std::string(LOOM_TESTDATA) + "/" + name), ComputeDType::F32, 1e-4,
                       n);
    }
}

TEST_CASE("bf16 megakernel stays within 6e-2 of the CPU backend step by step") {
  for (const char* name : kModels)
    for (int n : {1, 8}) {
      CAPTURE(name);
      CAPTURE(n);
      compare_with_cpu(load_model(std::string(LOOM_TESTDATA) + "/" + name), ComputeDType::BF16,
                       6e-2, n);
    }
}

TEST_CASE("f32 megakernel equals the graph path at contexts of 300-3,000 keys") {
  // The default splits (a split takes one partition of 64-256 keys or none at these
  // contexts), then one split a (slot, KV head): every 256-key partition of a sequence in
  // turn through one CTA's shared memory (what long contexts and batch 8 do), folded 3
  // partitions a chunk (what past ~9,000 keys does); then attention's buffers over the ring
  // (the default at 1-2 slots puts them beside it and stages K/V an instruction early).
  std::vector<MegakernelDebug> settings(3);
  settings[1].attn_splits = 1;
  settings[1].reduce_chunk = 3;
  settings[2].attn_apart = 1;
  compare_with_graph(ComputeDType::F32,
                     {{3000}, {300, 2999}, {255, 256, 257, 511, 512, 1300, 2048, 3071}}, settings,
                     3, 2e-5);
}

// Block size 64, the CUDA backend's default (a block is a whole decode tile of the graph
// path and four blocks a 256-key partition of the megakernel), at contexts on and off the
// block edges; the default splits, then one split a (slot, KV head).
TEST_CASE("f32 megakernel equals the graph path at block size 64") {
  std::vector<MegakernelDebug> settings(2);
  settings[1].attn_splits = 1;
  compare_with_graph(ComputeDType::F32, {{300, 2999}, {63, 64, 65, 511, 512, 1300, 2048, 3071}},
                     settings, 2, 2e-5, 64);
}

// bf16 at head_dim 64: attention's k and v rows sit swizzled in shared memory at 1-2 slots
// (attention_ops.cuh, kv_chunk), which the tiny checkpoints' head_dim 16 leaves in place. At 4
// and 8 slots the GEMVs run on the tensor cores (gemv_mma.cuh: long_spec's k of 512 and 1,024
// fit its geometry, the tiny checkpoints' 96 and 160 do not), then on the dot loop.
TEST_CASE("bf16 megakernel near the graph path (6e-2) at contexts of 300-3,000 keys") {
  std::vector<MegakernelDebug> settings(3);  // attention's buffers beside the ring, then over it
  settings[1].attn_apart = 1;
  settings[2].gemv_mma = 1;
  compare_with_graph(
      ComputeDType::BF16,
      {{3000}, {300, 2999}, {1300, 64, 2048, 3071}, {700, 1, 2500, 300, 64, 1025, 3000, 17}},
      settings, 2, 6e-2);
}

// bf16 at block size 64 (the backend's default): at 4-8 slots each CTA's four warp groups
// fold their own chains of 64-key partitions (attention_groups.cuh), then AttnReduce folds the
// groups' slots. With the default splits (16-32 a KV head here) a group takes one partition at
// these contexts; with one or two splits a group folds up to 12 or 6 partitions online.
TEST_CASE("bf16 megakernel near the graph path (6e-2) at block size 64") {
  std::vector<MegakernelDebug> settings(3);
  settings[1].attn_splits = 1;
  settings[2].attn_splits = 2;
  compare_with_graph(ComputeDType::BF16,
                     {{700, 1, 2500, 300, 64, 1025, 3000, 17}, {63, 64, 65, 3071}, {300, 2999}},
                     settings, 2, 6e-2, 64);
}

// Batch 8, then batch 2 (attention's buffers beside the ring there, its K/V staged while the
// instruction before runs: a jittered wait must not let the staging land late or early).
TEST_CASE("bf16 megakernel: the same bits over 1,000 replays with jitter and permuted SM lists") {
  const int per_seq = 4096 / 16;
  for (const std::vector<int>& ctx :
       {std::vector<int>{700, 1, 2500, 300, 64, 1025, 3000, 17}, std::vector<int>{700, 2500}}) {
    CAPTURE(ctx.size());
    auto be = random_backend(ComputeDType::BF16, MegakernelMode::Auto, int(ctx.size()) * per_seq);
    const StepBatch b = decode_batch(ctx, per_seq, 3);
    StepOutput base;
    be->step(b, base);  // rewrites each sequence's new key: every replay sees the same cache
    be->step(b, base);
    REQUIRE(cuda_megakernel_steps(*be) == 2);
    int replays = 0, differing = 0;
    for (uint32_t round = 1; round <= 10; round++) {
      MegakernelDebug dbg;
      dbg.jitter_seed = round * 2654435761u;
      dbg.permute_seed = round;
      cuda_set_megakernel_debug(*be, dbg);
      for (int i = 0; i < 100; i++) {
        StepOutput out;
        be->step(b, out);
        replays++;
        differing +=
            out.tokens != base.tokens || std::memcmp(out.logits.data(), base.logits.data(),
                                                     out.logits.size() * sizeof(float)) != 0;
      }
    }
    CHECK(replays == 1000);
    CHECK(differing == 0);
    CHECK(cuda_megakernel_steps(*be) == 1002);
  }
}

TEST_CASE("megakernel: a wait that never completes fails the step, and the next step recovers") {
  const int per_seq = 4096 / 16;
  auto be = random_backend(ComputeDType::BF16, MegakernelMode::Auto, 2 * per_seq);
  const StepBatch b = decode_batch({500, 900}, per_seq, 1);
  StepOutput base;
  be->step(b, base);
  MegakernelDebug dbg;
  dbg.drop_unit = true;
  dbg.timeout_ns = 50'000'000;  // 50 ms
  cuda_set_megakernel_debug(*be, dbg);
  StepOutput out;
  std::string what;
  try {
    be->step(b, out);
  } catch (const Error& e) {
    what = e.what();
  }
  CHECK(what.find("megakernel: a decode step of 2 sequences was abandoned") != std::string::npos);
  // The first CTA to give up names its counter (any of those the dropped unit holds back).
  CHECK(what.find("the wait on counter ") != std::string::npos);
  MESSAGE(what);
  cuda_set_megakernel_debug(*be, MegakernelDebug{});
  be->step(b, out);
  CHECK(out.tokens == base.tokens);
  CHECK(std::memcmp(out.logits.data(), base.logits.data(), out.logits.size() * 4) == 0);
}
