// The whole CUDA backend on the tiny checkpoints (v1 bf16, V2 f32, plain Llama f16 with a tied
// lm_head):
//   1. fp32 CUDA against the CPU backend on identical hand-built StepBatches (a prefill chunk,
//      frame chunks of last token + action slots, single-slot decodes that cross 16-slot block
//      boundaries and replay CUDA graphs, three sequences together, greedy / seeded / top-k+top-p
//      draws): last-slot logits within 1e-4 relative, tokens identical;
//   2. bf16 CUDA against the CPU backend on the same batches: logits within 6e-2 (measured
//      worst step 5.5e-2; the first draw of each model is within 2.6e-2);
//   3. both dtypes through the engine against the HF goldens (testdata/*/golden.json): fp32
//      tokens identical and logits within 1e-4; bf16 logits within 4e-2 wherever the token
//      stream so far still equals HF's (a bf16 rounding may flip a later draw).
// Why 4e-2 and not 2e-2 for bf16: HF transformers itself, run in bf16 on these checkpoints,
// lands 1.1e-2 (tiny_v1), 3.1e-2 (tiny_v2) and 1.8e-2 (tiny_llama) from the fp32 goldens at the
// first draw (scripts/hf_reference.py's model cast to bfloat16, measured 2026-11-22): tiny
// random models with f32/f16 weights rounded to bf16 do not meet 2e-2 in any bf16 engine.
#include <doctest/doctest.h>

#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "golden.h"
#include "model/mapping.h"
#include "step_driver.h"

using namespace loom;
using namespace loom::test;

namespace {

const char* const kModels[] = {"tiny_v1", "tiny_v2", "tiny_llama"};

void compare_with_cpu(const LoadedModel& m, ComputeDType dtype, double tol, int n_seqs = 3,
                      bool batch_invariant = false, int block_size = 16) {
  auto gpu = make_cuda_backend(dtype, 0, batch_invariant);
  loom::test::compare_with_cpu(m, *gpu, tol, n_seqs, 3, block_size);
}

}  // namespace

TEST_CASE("fp32 CUDA backend equals the CPU backend step by step") {
  for (const char* name : kModels) {
    CAPTURE(name);
    const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/" + name);
    compare_with_cpu(m, ComputeDType::F32, 1e-4);
  }
}

TEST_CASE("bf16 CUDA backend stays within 6e-2 of the CPU backend step by step") {
  // 2 sequences: the fused tensor-core GEMV schedule; 3 (bucket 4): the GEMM path with qkv, o
  // and down through the GEMV and the norms by PDL.
  for (const char* name : kModels) {
    CAPTURE(name);
    const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/" + name);
    for (int n_seqs : {2, 3}) {
      CAPTURE(n_seqs);
      compare_with_cpu(m, ComputeDType::BF16, 6e-2, n_seqs);
    }
  }
}

TEST_CASE("bf16 CUDA backend with 12 sequences (cuBLAS layers, bf16 lm_head) vs the CPU") {
  // More than 8 rows: the GEMM schedule and the cuBLAS lm_head with bf16 logits.
  const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/tiny_v1");
  compare_with_cpu(m, ComputeDType::BF16, 6e-2, 12);
}

// Blocks of 64 slots, what `loom run` uses on cuda (CudaBackend::default_block_size: a decode
// tile is one TMA box), both backends at that size: fp32 tokens equal to the CPU's and bf16
// within 6e-2, at 2, 3 and 12 sequences (the fused GEMV schedule, the GEMM path with GEMVs,
// cuBLAS layers); tiny_v1 and v2's 78 positions cross a block boundary.
TEST_CASE("CUDA backend at block size 64 against the CPU backend step by step") {
  for (const char* name : kModels) {
    CAPTURE(name);
    const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/" + name);
    compare_with_cpu(m, ComputeDType::F32, 1e-4, 3, false, 64);
    for (int n_seqs : {2, 3, 12}) {
      CAPTURE(n_seqs);
      compare_with_cpu(m, ComputeDType::BF16, 6e-2, n_seqs, false, 64);
    }
  }
}

// Steps holding a frame's action chunk (its slots as one-slot tiles beside the decoding
// sequences) replay a graph per (bucket, extra slots, action slots); the same steps run eagerly
// (profiling: no graphs) must give the same bits, 3 sequences and 12 (bucket 16: padding
// sequences after the chunks' extra slots).
TEST_CASE("bf16 chunk steps from graphs equal the same steps run eagerly, bit for bit") {
  const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/tiny_v1");
  for (int n_seqs : {3, 12}) {
    CAPTURE(n_seqs);
    auto eager = make_cuda_backend(ComputeDType::BF16, 0);
    auto graphs = make_cuda_backend(ComputeDType::BF16, 0);
    eager->set_profiling(true);
    CacheRequest cr;
    cr.block_size = 16;
    cr.num_blocks = 5 * n_seqs + 8;
    for (Backend* be : {eager.get(), graphs.get()}) {
      be->load(m.spec, m.weights);
      REQUIRE(be->allocate_cache(cr) == cr.num_blocks);
    }
    int compared = 0, decode_steps = 0;
    for (Backend* be : {eager.get(), graphs.get()}) be->set_step_timing(true);
    const StepCounts c = drive_steps(m.spec, {eager.get(), graphs.get()}, n_seqs, cr.num_blocks,
                                     [&](int, const StepBatch& b, std::vector<StepOutput>& outs) {
                                       CHECK(outs[1].tokens == outs[0].tokens);
                                       CHECK(outs[1].logits == outs[0].logits);
                                       compared++;
                                       decode_steps += b.n_slots() == b.n_seqs() &&
                                                       std::count(b.tokens.begin(), b.tokens.end(),
                                                                  kActionSlot) == 0;
                                     });
    CHECK(c.chunk_steps >= 3);
    CHECK(compared == c.steps);
    // The profiling backend also ran every 16th decode step as graphs, whole and without
    // attention (time_graph_split), before the step itself: the equal bits above show those
    // replays changed nothing.
    REQUIRE(decode_steps >= 1);
    int timed = 0;
    for (const KernelTime& k : eager->kernel_times())
      if (k.phase == "decode graph") {
        CHECK(k.calls == (decode_steps + 15) / 16);
        CHECK(k.ms > 0);
        timed++;
      }
    CHECK(timed == 2);
    // Every chunk step after the first of its shape replayed a graph (the first captures it).
    CHECK(cuda_chunk_graph_steps(*graphs) >= 2);
    CHECK(cuda_chunk_graph_steps(*eager) == 0);
    // loom bench's capture line: each shape's first step captured its graph, the others
    // replayed one; the profiling backend runs its steps eagerly and captures none on that path.
    const StepTiming tg = graphs->step_timing(), te = eager->step_timing();
    CHECK(tg.captures >= 2);  // a decode bucket and a chunk shape at least
    CHECK(tg.captures < c.steps);
    CHECK(tg.capture_s > 0);
    CHECK(te.captures == 0);
  }
}

// An eager step takes its graph's kernels: a decode step of 2 sequences of which one draws (no
// logits asked) has one output row eagerly but its bucket's 2 in a graph, so the lm_head is
// chosen on the sequences (lm_head_gemv): cuBLAS's (bf16 logits) in both, never the one-row
// fused GEMV (fp32 logits) that an eager step alone would take. Checked by the eager
// (profiling) backend's kernel families; the graph backend runs the same batches beside it.
TEST_CASE("bf16 decode of 2 sequences with one draw takes cuBLAS's lm_head eagerly as in graphs") {
  const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/tiny_llama");
  auto eager = make_cuda_backend(ComputeDType::BF16, 0);
  auto graphs = make_cuda_backend(ComputeDType::BF16, 0);
  eager->set_profiling(true);
  CacheRequest cr;
  cr.block_size = 16;
  cr.num_blocks = 8;
  for (Backend* be : {eager.get(), graphs.get()}) {
    be->load(m.spec, m.weights);
    REQUIRE(be->allocate_cache(cr) == cr.num_blocks);
  }
  std::mt19937 g(7);
  const int prompt = 5, decode_steps = 20;
  int32_t next = 0;  // sequence 0's draw, fed back
  for (int it = 0; it <= decode_steps; it++) {
    CAPTURE(it);
    StepBatch b;
    b.blocks_per_seq = 4;
    for (int s = 0; s < 2; s++) {
      const int pos = it == 0 ? 0 : prompt + it - 1, n = it == 0 ? prompt : 1;
      b.kv_len.push_back(pos);
      b.slot_start.push_back(b.n_slots());
      for (int j = 0; j < n; j++) {
        const bool fed = it > 0 && s == 0;
        b.tokens.push_back(fed ? next : int32_t(g() % uint32_t(m.spec.vocab)));
        b.positions.push_back(pos + j);
      }
      for (int k = 0; k < b.blocks_per_seq; k++) b.block_tables.push_back(4 * s + k);
      b.sample.push_back(it == 0 || s == 0 ? 1 : 0);
      b.sampling.push_back({0.9f, 0, 1.0f, 11});
      b.sample_index.push_back(0);
      b.draw_index.push_back(uint64_t(it));
    }
    b.slot_start.push_back(b.n_slots());
    StepOutput oe, og;
    eager->step(b, oe);
    graphs->step(b, og);
    REQUIRE(oe.tokens.size() == 2);
    REQUIRE(og.tokens.size() == 2);
    CHECK((oe.tokens[0] >= 0 && oe.tokens[0] < m.spec.vocab));
    if (it > 0) CHECK(oe.tokens[1] == -1);  // sequence 1 draws at the prompt step only
    next = oe.tokens[0];
  }
  int64_t gemm = 0, gemv = 0;
  for (const KernelTime& k : eager->kernel_times()) {
    if (k.name == "gemm_lm_head") gemm += k.calls;
    if (k.name == "gemv_lm_head") gemv += k.calls;
  }
  CHECK(gemv == 0);
  CHECK(gemm == decode_steps + 1);  // the prompt step's too
}

TEST_CASE("bf16 batch-invariant CUDA backend (linear_fixed layers) stays within 6e-2 of the CPU") {
  // Every model (V2: the action MLP layers too), 3 and 12 sequences: decode graphs, frame
  // chunks and prefill through linear_fixed, lm_head to fp32 logits.
  for (const char* name : kModels) {
    CAPTURE(name);
    const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/" + name);
    compare_with_cpu(m, ComputeDType::BF16, 6e-2, 3, true);
  }
  const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/tiny_v1");
  compare_with_cpu(m, ComputeDType::BF16, 6e-2, 12, true);
}

TEST_CASE("CUDA backend through the engine reproduces the HF goldens") {
  for (ComputeDType dtype : {ComputeDType::F32, ComputeDType::BF16}) {
    const bool f32 = dtype == ComputeDType::F32;
    CAPTURE(f32);
    for (const std::string& dir : golden_dirs()) {
      CAPTURE(dir);
      const nlohmann::json golden = read_json(dir + "/golden.json");
      LoadedModel m = load_model(dir);
      auto gpu = make_cuda_backend(dtype, 0);
      gpu->load(m.spec, m.weights);
      int logit_checks = 0, token_checks = 0;
      for (const auto& c : golden["cases"]) {
        const std::string name = c["name"];
        CAPTURE(name);
        GoldenRun run = run_golden_case(c, m.spec, *gpu);
        std::map<uint32_t, std::vector<int32_t>> want_tokens;
        for (const auto& s : c["samples"]) {
          const uint32_t k = s["sample"].get<uint32_t>();
          want_tokens[k] = golden_tokens(s);
          REQUIRE(run.tokens.count(k) == 1);
          if (f32) {
            CHECK(run.tokens[k] == want_tokens[k]);
            token_checks++;
          }
        }
        if (!c.contains("logits")) continue;
        for (const auto& l : c["logits"]) {
          const uint32_t k = l["sample"].get<uint32_t>();
          const uint64_t d = l["draw_index"].get<uint64_t>();
          CAPTURE(d);
          const std::vector<int32_t>& a = run.tokens[k];
          const std::vector<int32_t>& w = want_tokens[k];
          const bool same_prefix = a.size() >= d && w.size() >= d &&
                                   std::equal(a.begin(), a.begin() + long(d), w.begin());
          if (!same_prefix) {
            CHECK(!f32);  // fp32 streams never diverge
            continue;
          }
          REQUIRE(run.logits.count({k, d}) == 1);
          const std::vector<float> want = l["values"].get<std::vector<float>>();
          CHECK(rel_error(run.logits[{k, d}], want) < (f32 ? 1e-4 : 4e-2));
          logit_checks++;
        }
      }
      if (f32) CHECK(token_checks >= 4);
      CHECK(logit_checks >= (f32 ? 4 : 1));
    }
  }
}

// A pool larger than the device (--kv-blocks 2147483647: its byte count overflowed int before)
// is refused naming the option, the true byte count and the blocks that would fit; the backend
// then still takes a pool that fits.
TEST_CASE("a KV pool over the device's free memory is refused with its true size") {
  const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/tiny_v1");
  auto be = make_cuda_backend(ComputeDType::F32, 0);
  be->load(m.spec, m.weights);
  CacheRequest cr;
  cr.block_size = 16;
  cr.num_blocks = 2147483647;
  const size_t per_block = be->kv_block_bytes(cr.block_size);
  const std::string need = std::to_string(per_block * (size_t(cr.num_blocks) + 1));
  std::string msg;
  try {
    be->allocate_cache(cr);
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("--kv-blocks 2147483647: a KV pool of 2147483647 + 1 blocks of " +
                 std::to_string(per_block) + " bytes needs " + need + " bytes") !=
        std::string::npos);
  CHECK(msg.find("expected at most ") != std::string::npos);
  cr.num_blocks = 8;
  CHECK(be->allocate_cache(cr) == 8);
}
