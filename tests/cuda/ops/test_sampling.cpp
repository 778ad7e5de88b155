// The sampling family (kernels/sampling.cuh): sample_tokens against the host sampler
// (backend/sampler.h, pinned by tests/test_sampler.cpp) over the full 262,145-entry vocabulary,
// greedy, temperature, top-k and top-p, on continuous and quantised (tied) logits, as fp32 and
// as the bf16 the lm_head GEMM writes; an inactive row writes -1; many rows in a reused workspace.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/sampler.h"
#include "core/philox.h"
#include "cuda/cuda_test_util.h"
#include "kernels/sampling.cuh"

using namespace loom;
using namespace loom::gpu;
using namespace loom::test;

TEST_CASE("device sampler gives sample_token's token over the full 262,145 vocabulary") {
  const int vocab = 262145;
  struct Mode {
    float temperature;
    int top_k;
    float top_p;
  };
  // Top-k and top-p cuts that fall in the tails and in the bulk of the logits (a boundary bin
  // of thousands: the filter's refinement and its fallback to the radix select; sampling.cu);
  // top-k up to 1,024 by the sampled threshold (and top-p over its sorted set), 1,025 and 5,000
  // by the digit histograms; quantised logits' ties overflow the sampled path's candidates.
  const std::vector<Mode> modes = {{0.0f, 0, 1.0f},   {0.9f, 0, 1.0f},    {1.0f, 50, 1.0f},
                                   {0.8f, 0, 0.9f},   {1.0f, 1000, 0.5f}, {0.7f, 0, 0.05f},
                                   {1.3f, 1, 1.0f},   {2.0f, 0, 0.5f},    {1.0f, 5000, 1.0f},
                                   {1.0f, 0, 0.999f}, {0.9f, 200, 0.95f}, {1.0f, 1024, 1.0f},
                                   {1.0f, 1025, 0.9f}};
  // Two logit sets: continuous (no ties) and quantised (many exact ties, which exercise the
  // lowest-id tie rules of argmax, top-k and top-p); bf16 logits (continuous ones round to many
  // ties) against the host sampler on their exact fp32 values.
  for (const DType lt : {DType::F32, DType::BF16})
    for (int quantised = 0; quantised < 2; quantised++) {
      CAPTURE(quantised);
      CAPTURE(dtype_name(lt));
      std::mt19937_64 g(31 + quantised);
      std::normal_distribution<float> nd(0.0f, 3.0f);
      const int rows = int(modes.size());
      std::vector<float> logits(size_t(rows) * vocab);
      for (float& v : logits) {
        v = nd(g);
        if (quantised) v = std::round(v * 2.0f) / 2.0f;
      }
      if (lt == DType::BF16) logits = round_bf16(logits);
      DevBuf dl = upload(logits, lt);
      DevBuf ws(sample_workspace_bytes(rows)), tok(size_t(rows) * 4);
      int checked = 0;
      for (uint64_t seed : {0ull, 7ull, 123456789ull})
        for (uint64_t draw : {0ull, 1ull, 5000000000ull}) {
          std::vector<SampleParamsDev> p(static_cast<size_t>(rows));
          for (int r = 0; r < rows; r++) {
            p[size_t(r)].seed = seed;
            p[size_t(r)].draw_index = draw;
            p[size_t(r)].temperature = modes[size_t(r)].temperature;
            p[size_t(r)].top_k = modes[size_t(r)].top_k;
            p[size_t(r)].top_p = modes[size_t(r)].top_p;
            p[size_t(r)].sample_index = uint32_t(r % 3);
            p[size_t(r)].active = 1;
          }
          DevBuf dp = upload_ints(p);
          tok.poison();
          LOOM_KERNEL(sample_tokens(lt, dl.get(), rows, vocab, vocab, dp.as<SampleParamsDev>(),
                                    ws.get(), tok.as<int32_t>(), nullptr));
          std::vector<int32_t> got(static_cast<size_t>(rows));
          LOOM_CUDA_CHECK(
              cudaMemcpy(got.data(), tok.get(), got.size() * 4, cudaMemcpyDeviceToHost));
          for (int r = 0; r < rows; r++) {
            SamplingParams sp;
            sp.temperature = modes[size_t(r)].temperature;
            sp.top_k = modes[size_t(r)].top_k;
            sp.top_p = modes[size_t(r)].top_p;
            sp.seed = seed;
            const int32_t want =
                sample_token(logits.data() + size_t(r) * vocab, vocab, sp, uint32_t(r % 3), draw);
            CAPTURE(r);
            CAPTURE(seed);
            CAPTURE(draw);
            CHECK(got[size_t(r)] == want);
            checked++;
          }
        }
      CHECK(checked == 9 * int(modes.size()));
    }
  // An unsupported logits dtype is refused, naming it.
  {
    DevBuf dl(64), ws(sample_workspace_bytes(1)), tok(4), dp(sizeof(SampleParamsDev));
    const Status st = sample_tokens(DType::F16, dl.get(), 1, 16, 16, dp.as<SampleParamsDev>(),
                                    ws.get(), tok.as<int32_t>(), nullptr);
    CHECK(!st.ok);
    CHECK(st.message.find("f16") != std::string::npos);
  }
  // An inactive row writes -1.
  std::vector<float> l(1000, 0.5f);
  DevBuf dl = upload(l, DType::F32), ws(sample_workspace_bytes(1)), tok(4);
  SampleParamsDev off{};
  DevBuf dp = upload_ints(std::vector<SampleParamsDev>{off});
  LOOM_KERNEL(sample_tokens(DType::F32, dl.get(), 1, 1000, 1000, dp.as<SampleParamsDev>(), ws.get(),
                            tok.as<int32_t>(), nullptr));
  int32_t got = 0;
  LOOM_CUDA_CHECK(cudaMemcpy(&got, tok.get(), 4, cudaMemcpyDeviceToHost));
  CHECK(got == -1);
}

// A draw over many rows (700: 22,400 draw blocks, many waves of them) in a workspace a first call
// filled (temperature on every row: every partial written) and a second reuses with greedy,
// temperature, listed top-k, top-p and inactive rows mixed: a top-p row's token is its filter's
// and its draw blocks write no partial, so a stale partial read would give the first call's token.
TEST_CASE("device draw over many rows never reads a stale partial") {
  const int vocab = 65537, rows = 700;
  for (const DType lt : {DType::F32, DType::BF16}) {
    CAPTURE(dtype_name(lt));
    std::mt19937_64 g(5);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<float> logits(size_t(rows) * vocab);
    for (float& v : logits) v = nd(g);
    if (lt == DType::BF16) logits = round_bf16(logits);
    DevBuf dl = upload(logits, lt), ws(sample_workspace_bytes(rows)), tok(size_t(rows) * 4);
    for (int call = 0; call < 2; call++) {
      CAPTURE(call);
      std::vector<SamplingParams> sp(static_cast<size_t>(rows));
      std::vector<SampleParamsDev> p(static_cast<size_t>(rows));
      for (int r = 0; r < rows; r++) {
        SamplingParams& s = sp[size_t(r)];
        s.seed = 11;
        s.temperature = 0.9f;
        const int mode = call == 0 ? 1 : r % 5;  // greedy, temperature, top-k, top-p, inactive
        if (mode == 0) s.temperature = 0.0f;
        if (mode == 2) s.top_k = 50;
        if (mode == 3) s.top_p = 0.9f;
        SampleParamsDev& d = p[size_t(r)];
        d.seed = s.seed;
        d.draw_index = 3;
        d.temperature = s.temperature;
        d.top_k = s.top_k;
        d.top_p = s.top_p;
        d.sample_index = uint32_t(r);
        d.active = mode == 4 ? 0 : 1;
      }
      DevBuf dp = upload_ints(p);
      tok.poison();
      LOOM_KERNEL(sample_tokens(lt, dl.get(), rows, vocab, vocab, dp.as<SampleParamsDev>(),
                                ws.get(), tok.as<int32_t>(), nullptr));
      std::vector<int32_t> got(static_cast<size_t>(rows));
      LOOM_CUDA_CHECK(cudaMemcpy(got.data(), tok.get(), got.size() * 4, cudaMemcpyDeviceToHost));
      int mismatched = 0;
      for (int r = 0; r < rows; r++) {
        const int32_t want = p[size_t(r)].active == 0
                                 ? -1
                                 : sample_token(logits.data() + size_t(r) * vocab, vocab,
                                                sp[size_t(r)], uint32_t(r), 3);
        if (got[size_t(r)] != want && mismatched++ < 5)
          MESSAGE("row ", r, ": got ", got[size_t(r)], ", want ", want);
      }
      CHECK(mismatched == 0);
    }
  }
}

// The filter's kept set itself (the draw tests above see it only through the tokens, which a cut
// one element off rarely changes): sample_kept's set, id for id, and its token, for top-p cuts over
// logit spreads from 0.5 to 16 (the cut 3 to 10 units of z below zmax: top-p's z bins, their
// catch-all bin, and where a boundary bin overflows the fallbacks), with top-k before it, and
// top-k's listed ids.
TEST_CASE("device filter keeps exactly sample_kept's set over logit spreads") {
  const int vocab = 262145;
  struct Mode {
    int top_k;
    float top_p;
  };
  const std::vector<Mode> modes = {{0, 0.5f}, {0, 0.9f}, {0, 0.99f}, {1000, 0.9f}, {50, 1.0f}};
  const std::vector<float> sigmas = {0.5f, 1.0f, 2.0f, 3.0f, 4.0f, 8.0f, 16.0f};
  // Then three sigma-1 rows with non-finite logits: a +inf (every weight 0: the first kept),
  // NaN at ids 7, 99, 1000 under top-k 50 + top-p (their keys sort first, their weights are 0,
  // zmax skips them) and the same under top-p alone; and a row of zeros but ids 5 and 9 (1.0),
  // whose 262,143 zeros pass the 16-bit count a bf16 value gets in top_p_by_values. Then two
  // top-p rows at temperature 0.9 that the fp32 filter's hoisted division does not take
  // (hoisted_quotient_fits): sigma 1 less its largest logit (zmax = 0), and sigma 1 times 2^100.
  const int grid = int(modes.size() * sigmas.size()), rows = grid + 6;
  const std::vector<Mode> special = {{0, 0.9f}, {50, 0.9f}, {0, 0.9f},
                                     {0, 0.9f}, {0, 0.9f},  {0, 0.9f}};
  // Row r's temperature: 0.9 (z by IEEE division), 1 or 0.5 (a power of two: x · (1/T)); the
  // last two rows 0.9.
  auto temperature_of = [grid](int r) {
    return r % 3 == 0 || r >= grid + 4 ? 0.9f : r % 3 == 1 ? 1.0f : 0.5f;
  };
  auto key_of = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  };
  for (const DType lt : {DType::F32, DType::BF16}) {
    CAPTURE(dtype_name(lt));
    std::mt19937_64 g(77);
    std::vector<float> logits(size_t(rows) * vocab);
    for (int r = 0; r < rows; r++) {
      std::normal_distribution<float> nd(0.0f, r < grid ? sigmas[size_t(r) / modes.size()] : 1.0f);
      for (int i = 0; i < vocab; i++) logits[size_t(r) * vocab + i] = nd(g);
    }
    logits[size_t(grid) * vocab + 123] = INFINITY;
    for (int r = grid + 1; r < grid + 3; r++)
      for (int i : {7, 99, 1000}) logits[size_t(r) * vocab + i] = std::nanf("");
    float* zeros = logits.data() + size_t(grid + 3) * vocab;
    std::fill(zeros, zeros + vocab, 0.0f);
    zeros[5] = zeros[9] = 1.0f;
    float* below_zero = zeros + vocab;
    const float top = *std::max_element(below_zero, below_zero + vocab);
    for (float* x = below_zero; x < below_zero + vocab; x++) *x -= top;
    for (float* x = below_zero + vocab; x < below_zero + 2 * vocab; x++) *x *= 0x1p100f;
    if (lt == DType::BF16) logits = round_bf16(logits);
    std::vector<SampleParamsDev> p(static_cast<size_t>(rows));
    for (int r = 0; r < rows; r++) {
      const Mode m = r < grid ? modes[size_t(r) % modes.size()] : special[size_t(r - grid)];
      p[size_t(r)].temperature = temperature_of(r);
      p[size_t(r)].top_k = m.top_k;
      p[size_t(r)].top_p = m.top_p;
      p[size_t(r)].active = 1;
    }
    DevBuf dl = upload(logits, lt), dp = upload_ints(p);
    DevBuf ws(sample_workspace_bytes(rows)), tok(size_t(rows) * 4);
    LOOM_KERNEL(sample_tokens(lt, dl.get(), rows, vocab, vocab, dp.as<SampleParamsDev>(), ws.get(),
                              tok.as<int32_t>(), nullptr));
    std::vector<SampleFilter> filters(static_cast<size_t>(rows));
    std::vector<int32_t> tokens(static_cast<size_t>(rows));
    LOOM_CUDA_CHECK(
        cudaMemcpy(tokens.data(), tok.get(), tokens.size() * 4, cudaMemcpyDeviceToHost));
    std::vector<int32_t> lists(size_t(rows) * kSampleList);
    const size_t lists_at = size_t(rows) * (sizeof(SampleFilter) + kSampleChunks * 8);
    LOOM_CUDA_CHECK(cudaMemcpy(filters.data(), ws.get(), filters.size() * sizeof(SampleFilter),
                               cudaMemcpyDeviceToHost));
    LOOM_CUDA_CHECK(cudaMemcpy(lists.data(), static_cast<char*>(ws.get()) + lists_at,
                               lists.size() * 4, cudaMemcpyDeviceToHost));
    for (int r = 0; r < rows; r++) {
      CAPTURE(r);
      CAPTURE(p[size_t(r)].top_k);
      CAPTURE(p[size_t(r)].top_p);
      const float* row = logits.data() + size_t(r) * vocab;
      const float temperature = temperature_of(r);
      SamplingParams sp;
      sp.temperature = temperature;
      sp.top_k = p[size_t(r)].top_k;
      sp.top_p = p[size_t(r)].top_p;
      std::vector<int32_t> want = sample_kept(row, vocab, sp);
      REQUIRE(!want.empty());
      const SampleFilter f = filters[size_t(r)];
      std::vector<int32_t> got;
      if (f.listed > 0) {
        got.assign(lists.begin() + long(r) * kSampleList,
                   lists.begin() + long(r) * kSampleList + f.listed);
      } else {
        for (int i = 0; i < vocab; i++) {
          const uint32_t k = key_of(row[i] / temperature);
          if (k > f.thr || (k == f.thr && i <= f.id_cut)) got.push_back(i);
        }
      }
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
      CHECK(got.size() == want.size());
      CHECK(got == want);
      if (r == grid) CHECK(want == std::vector<int32_t>{123});
      // The token (draw stream 4 for every top-p row: the filter draws it).
      CHECK(tokens[size_t(r)] == sample_token(row, vocab, sp, 0u, 0u));
      CHECK((f.drawn >= 0) == (sp.top_p < 1.0f));
    }
  }
}

// The draw computes the exact fp64 noise only for logits whose float estimate is near the
// chunk's best (kernels/sampling.cu). These logits put every v = z + g within 1e-3 of the others
// (z = -g + eps, eps ~ U[0, 1e-3); logits = z T), hundreds in every chunk within the estimate's
// slack of the top, so a slack too small or a wrong candidate test picks another token; then
// infinite logits, which switch a chunk to the exact path for all its kept logits.
TEST_CASE("device draw stays exact where the noise decides between near-equal logits") {
  const int vocab = 262145;
  const uint64_t seed = 99, draw = 4242;
  const uint32_t sample = 2;
  std::mt19937_64 g(5);
  std::uniform_real_distribution<double> eps(0.0, 1e-3);
  struct Case {
    const char* name;
    float temperature;
    int top_k;
    float top_p;
    int edit;  // 0: none, 1: some -inf, 2: a +inf
  };
  const std::vector<Case> cases = {
      {"near-equal v, T 1", 1.0f, 0, 1.0f, 0},
      {"near-equal v, T 0.7 (z estimated as logit * (1/T))", 0.7f, 0, 1.0f, 0},
      {"near-equal v, top-k 5000", 1.0f, 5000, 1.0f, 0},
      {"-inf logits kept", 1.0f, 0, 1.0f, 1},
      {"+inf logit", 1.0f, 0, 1.0f, 2}};
  for (const Case& c : cases) {
    CAPTURE(c.name);
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (int i = 0; i < vocab; i++) {
      const float gn = gumbel_noise(philox_uniform(seed, sample, draw, uint32_t(i)));
      logits[size_t(i)] = float((-double(gn) + eps(g)) * c.temperature);
    }
    if (c.edit == 1)
      for (int i = 0; i < vocab; i += 97) logits[size_t(i)] = -INFINITY;
    if (c.edit == 2) logits[123457] = INFINITY;
    SampleParamsDev p;
    p.seed = seed;
    p.draw_index = draw;
    p.sample_index = sample;
    p.temperature = c.temperature;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.active = 1;
    DevBuf dl = upload(logits, DType::F32), ws(sample_workspace_bytes(1)), tok(4);
    DevBuf dp = upload_ints(std::vector<SampleParamsDev>{p});
    tok.poison();
    LOOM_KERNEL(sample_tokens(DType::F32, dl.get(), 1, vocab, vocab, dp.as<SampleParamsDev>(),
                              ws.get(), tok.as<int32_t>(), nullptr));
    int32_t got = -2;
    LOOM_CUDA_CHECK(cudaMemcpy(&got, tok.get(), 4, cudaMemcpyDeviceToHost));
    SamplingParams sp;
    sp.temperature = c.temperature;
    sp.top_k = c.top_k;
    sp.top_p = c.top_p;
    sp.seed = seed;
    const int32_t want = sample_token(logits.data(), vocab, sp, sample, draw);
    CHECK(got == want);
    if (c.edit == 2) CHECK(want == 123457);
  }
}
