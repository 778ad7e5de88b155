// Sampler: the Philox stream, the Gumbel-max draw against the softmax it must follow, the
// exact support of top-k / top-p, and determinism in (seed, sample, draw index).
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <vector>

#include "backend/sampler.h"
#include "core/philox.h"
#include "core/top_p_weight.h"

using namespace loom;

TEST_CASE("philox4x32-10 matches the Random123 known answers") {
  Philox4 a = philox4x32_10(0, 0, 0, 0, 0, 0);
  CHECK(a.v[0] == 0x6627e8d5u);
  CHECK(a.v[1] == 0xe169c58du);
  CHECK(a.v[2] == 0xbc57ac4cu);
  CHECK(a.v[3] == 0x9b00dbd8u);
  const uint32_t f = 0xffffffffu;
  Philox4 b = philox4x32_10(f, f, f, f, f, f);
  CHECK(b.v[0] == 0x408f276du);
  CHECK(b.v[1] == 0x41c83b0eu);
  CHECK(b.v[2] == 0xa20bc7c6u);
  CHECK(b.v[3] == 0x6d5451fdu);
}

// Draw stream 2: token t's uniform is word t % 4 of the Philox call for counter t / 4; the Python
// mirror (scripts/loom_sampler.py) gives these same uniforms.
TEST_CASE("philox_uniform takes word token % 4 of the call for counter token / 4") {
  const uint64_t seed = 0x123456789abcull, draw = 0x500000007ull;
  for (uint32_t g : {0u, 1u, 65536u, 0x3fffffffu}) {
    const Philox4 r = philox4x32_10(g, uint32_t(draw), uint32_t(draw >> 32), 3u, uint32_t(seed),
                                    uint32_t(seed >> 32));
    for (uint32_t j = 0; j < 4; j++) {
      CAPTURE(g);
      CAPTURE(j);
      CHECK(philox_uniform(seed, 3, draw, 4 * g + j) == uniform_from_bits(r.v[j]));
    }
  }
  // Four different words: the neighbours of a group do not share a uniform.
  std::set<float> four;
  for (uint32_t t = 8; t < 12; t++) four.insert(philox_uniform(seed, 3, draw, t));
  CHECK(four.size() == 4);
  // With seed, sample and draw 0, tokens 0..3 are the words of the Random123 known answer.
  CHECK(philox_uniform(0, 0, 0, 1) == uniform_from_bits(0xe169c58du));
  CHECK(philox_uniform(0, 0, 0, 3) == uniform_from_bits(0x9b00dbd8u));
  CHECK(uniform_from_bits(0x9b00dbd8u) == (float(0x9b00dbd8u >> 9) + 0.5f) / 8388608.0f);
}

TEST_CASE("philox_uniform stays strictly inside (0, 1)") {
  for (uint32_t t = 0; t < 10000; t++) {
    const float u = philox_uniform(42, 1, 7, t);
    REQUIRE(u > 0.0f);
    REQUIRE(u < 1.0f);
  }
}

// The device draw ranks logits by gumbel_noise_estimate and computes the exact noise only near
// the top (kernels/sampling.cu); its token is exact only if the estimate is within
// kGumbelEstimateErr of gumbel_noise for every uniform the stream can produce: (k + 0.5) / 2^23.
TEST_CASE("gumbel_noise_estimate is within kGumbelEstimateErr of gumbel_noise for every uniform") {
  double worst = 0;
  uint32_t worst_k = 0;
  for (uint32_t k = 0; k < (1u << 23); k++) {
    const float u = (float(k) + 0.5f) * (1.0f / 8388608.0f);
    const double e = std::fabs(double(gumbel_noise_estimate(u)) - double(gumbel_noise(u)));
    if (e > worst) worst = e, worst_k = k;
  }
  CAPTURE(worst_k);
  CHECK(worst <= double(kGumbelEstimateErr));
  CHECK(worst > 0.0);  // the estimate is a float computation, not the fp64 one
  // The extremes the stream reaches: u = 2^-24 and 1 - 2^-24.
  CHECK(gumbel_noise(0.5f / 8388608.0f) == doctest::Approx(-2.81154).epsilon(1e-4));
  CHECK(gumbel_noise(1.0f - 0.5f / 8388608.0f) == doctest::Approx(16.6355).epsilon(1e-4));
}

static std::vector<double> softmax(const std::vector<float>& z, float temperature) {
  double mx = -1e30, sum = 0;
  for (float v : z) mx = std::max(mx, double(v) / temperature);
  std::vector<double> p;
  for (float v : z) p.push_back(std::exp(double(v) / temperature - mx));
  for (double v : p) sum += v;
  for (double& v : p) v /= sum;
  return p;
}

// Pearson chi-square of `n` draws against probabilities p (entries with p = 0 must get none).
static double chi_square(const std::vector<float>& logits, const SamplingParams& sp,
                         const std::vector<double>& p, int n) {
  std::vector<int> count(p.size(), 0);
  for (int i = 0; i < n; i++)
    count[size_t(sample_token(logits.data(), int(logits.size()), sp, 0, uint64_t(i)))]++;
  double chi = 0;
  for (size_t i = 0; i < p.size(); i++) {
    if (p[i] == 0) {
      CHECK(count[i] == 0);
      continue;
    }
    const double e = p[i] * n;
    chi += (count[i] - e) * (count[i] - e) / e;
  }
  return chi;
}

TEST_CASE("draws follow softmax(logits / temperature): chi-square") {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 2.5f, -0.5f, 1.5f, 0.2f};
  for (float temperature : {1.0f, 0.5f, 2.0f}) {
    SamplingParams sp;
    sp.temperature = temperature;
    sp.seed = 1234;
    // 9 degrees of freedom: the 99.9% quantile is 27.88.
    const double chi = chi_square(logits, sp, softmax(logits, temperature), 40000);
    CAPTURE(temperature);
    CHECK(chi < 27.88);
  }
  // The same test must reject a draw from the wrong temperature.
  SamplingParams sp;
  sp.temperature = 1.0f;
  CHECK(chi_square(logits, sp, softmax(logits, 0.7f), 40000) > 100.0);
}

TEST_CASE("top-k keeps exactly the k most likely tokens, renormalised") {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 1.0f, -3.0f};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 3;
  sp.seed = 9;
  std::vector<double> p = softmax(logits, 1.0f);
  // kept: ids 1, 3, 5
  double kept = p[1] + p[3] + p[5];
  std::vector<double> q(p.size(), 0.0);
  for (int i : {1, 3, 5}) q[size_t(i)] = p[size_t(i)] / kept;
  CHECK(chi_square(logits, sp, q, 30000) < 13.82);  // 2 dof, 99.9%
}

TEST_CASE("top-p keeps the shortest prefix reaching the mass, ties broken by id") {
  // p ≈ 0.5, 0.3, 0.15, 0.05
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 3;
  auto support = [&](float top_p) {
    sp.top_p = top_p;
    std::set<int> seen;
    for (int i = 0; i < 4000; i++) seen.insert(sample_token(logits.data(), 4, sp, 0, uint64_t(i)));
    return seen;
  };
  CHECK(support(0.45f) == std::set<int>{0});
  CHECK(support(0.75f) == std::set<int>{0, 1});
  CHECK(support(0.9f) == std::set<int>{0, 1, 2});
  CHECK(support(1.0f) == std::set<int>{0, 1, 2, 3});
  // Equal probabilities: the lower id comes first in the prefix.
  const std::vector<float> flat = {0.0f, 0.0f, 0.0f, 0.0f};
  sp.top_p = 0.5f;
  std::set<int> seen;
  for (int i = 0; i < 2000; i++) seen.insert(sample_token(flat.data(), 4, sp, 0, uint64_t(i)));
  CHECK(seen == std::set<int>{0, 1});
}

TEST_CASE("top-p weights: the fixed-point definition's known answers") {
  // 2^40 · 2^-u, u = (zmax - z) · log2(e) in fp32 rounded down to 1/4096 (core/top_p_weight.h);
  // the values are scripts/loom_sampler.py's, which reads the same tables.
  CHECK(top_p_weight(2.0f, 2.0f) == (uint64_t(1) << 40));
  CHECK(top_p_weight(1.9f, 2.0f) == 995035492864ull);
  CHECK(top_p_weight(0.1f, 2.0f) == 164469966336ull);
  CHECK(top_p_weight(2.0f - 27.0f, 2.0f) > 0u);   // u = 38.95: the smallest weights
  CHECK(top_p_weight(2.0f - 27.8f, 2.0f) == 0u);  // u >= 40
  CHECK(top_p_weight(std::nanf(""), 2.0f) == 0u);
  CHECK(top_p_weight(INFINITY, INFINITY) == 0u);  // inf - inf: NaN
  // ceil(floor(p 2^40) M / 2^40): 0.9f is 0.89999997615814208984375.
  CHECK(top_p_target(0.9f, 3) == 3u);
  CHECK(top_p_target(0.5f, 100) == 50u);
  CHECK(top_p_target(0.95f, 0xffffffffffffull) == 267401224519680ull);
  CHECK(top_p_target(0.5f, 0) == 0u);
}

TEST_CASE("sample_kept lists the kept set in order, empty when every id is a candidate") {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 1.0f, 2.0f};
  SamplingParams sp;
  sp.temperature = 1.0f;
  CHECK(sample_kept(logits.data(), 7, sp).empty());  // no filter
  sp.top_k = 4;
  CHECK(sample_kept(logits.data(), 7, sp) == std::vector<int32_t>{1, 6, 3, 5});  // ties: lower id
  sp.top_k = 0;
  sp.top_p = 0.5f;  // p(1) = p(6) ≈ 0.28 each: the two reach 0.5
  CHECK(sample_kept(logits.data(), 7, sp) == std::vector<int32_t>{1, 6});
  sp.temperature = 0.0f;
  CHECK(sample_kept(logits.data(), 7, sp).empty());  // greedy
}

TEST_CASE("greedy is argmax with the lowest id on ties") {
  const std::vector<float> logits = {0.0f, 5.0f, 2.0f, 5.0f};
  SamplingParams sp;
  sp.temperature = 0.0f;
  CHECK(sample_token(logits.data(), 4, sp, 0, 0) == 1);
}

TEST_CASE("same (seed, sample, draw) gives the same token; each key changes the stream") {
  std::vector<float> logits(1000);
  for (int i = 0; i < 1000; i++) logits[size_t(i)] = float(std::sin(i * 0.37)) * 2.0f;
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 77;
  std::vector<int> a, b, other_seed, other_sample;
  for (uint64_t d = 0; d < 64; d++) {
    a.push_back(sample_token(logits.data(), 1000, sp, 0, d));
    b.push_back(sample_token(logits.data(), 1000, sp, 0, d));
    other_sample.push_back(sample_token(logits.data(), 1000, sp, 1, d));
  }
  sp.seed = 78;
  for (uint64_t d = 0; d < 64; d++)
    other_seed.push_back(sample_token(logits.data(), 1000, sp, 0, d));
  CHECK(a == b);
  CHECK(a != other_seed);
  CHECK(a != other_sample);
  std::set<int> distinct(a.begin(), a.end());
  CHECK(distinct.size() > 20);  // successive draws are not stuck on one token
}
