// Sampler: the Philox stream, the Gumbel-max draw against the softmax it must follow, the
// exact support of top-k / top-p, top-p's inverse-CDF draw (stream 4), and determinism in
// (seed, sample, draw index).
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
  // The round keys taken once give the same words (the device draw's loop).
  const PhiloxKeys keys = philox_seed_keys(seed);
  for (uint32_t g : {0u, 7u, 0xffffffffu}) {
    const Philox4 a = philox_group(keys, 3, draw, g), b = philox_group(seed, 3, draw, g);
    for (uint32_t j = 0; j < 4; j++) CHECK(a.v[j] == b.v[j]);
  }
  CHECK(keys.k0[0] == uint32_t(seed));
  CHECK(keys.k1[9] == uint32_t(seed >> 32) + 9u * 0xBB67AE85u);
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

TEST_CASE("top-p tail weights in 32-bit operations equal the definition past u = 16") {
  // Every quantum the fp32 filter weighs past its 65,536 classes, and a token that weighs 0.
  // F as the filter's table holds it, by q & 4095.
  auto tail = [](uint32_t q) {
    const uint32_t f = top_p_weight_f(kTopPCoarse[(q >> 6) & 63u], kTopPFine[q & 63u]);
    return top_p_tail_weight(f, q + kTopPQuantumBias);
  };
  long differ = 0;
  for (uint32_t q = 16u << 12; q < 40u * 4096u; q++)
    differ += tail(q) != top_p_weight_of(q, kTopPCoarse, kTopPFine);
  CHECK(differ == 0);
  CHECK(tail(kTopPNoWeight) == 0u);
  CHECK(tail(kTopPPastQuanta) == 0u);  // F = 2^31 there
  CHECK(tail(16u << 12) == (uint64_t(1) << 40) >> 16);
}

TEST_CASE("top_p_count_quantum is top_p_quantum below u = 40, kTopPPastQuanta from there") {
  // z below zmax = 3 by steps that cross u = 40 (z = 3 - 40 ln 2 ≈ -24.73), then -inf and NaN.
  long differ = 0, past = 0;
  for (float z = 3.0f; z > -40.0f; z -= 1e-4f) {
    const uint32_t q = top_p_quantum(z, 3.0f), c = top_p_count_quantum(z, 3.0f);
    if (q == kTopPNoWeight) {
      past++;
      differ += c != kTopPPastQuanta;
    } else {
      differ += c != q;
    }
  }
  CHECK(differ == 0);
  CHECK(past > 1000);
  CHECK(top_p_count_quantum(-INFINITY, 3.0f) == kTopPPastQuanta);
  CHECK(top_p_count_quantum(NAN, 3.0f) == kTopPPastQuanta);
}

TEST_CASE("top_p_class_mass sums a thread's 64 classes as top_p_weight_of weighs them") {
  // Every thread t of the class scan (q = 64 t + j < 16 << 12), with counts from a fixed
  // generator (0 to 65,535) and with every count at 65,535 (the sum of c F at its largest,
  // 2^16 · 64 · 2^31 = 2^53, still shifts exactly), the words in a skewed order as the kernel
  // reads them.
  uint32_t state = 12345u;
  long differ = 0;
  for (uint32_t t = 0; t < 1024u; t++) {
    for (int fill = 0; fill < 2; fill++) {
      uint32_t counts[64];
      for (uint32_t& c : counts) {
        state = state * 1664525u + 1013904223u;
        c = fill == 0 ? state >> 16 : 65535u;
      }
      uint64_t want = 0u;
      for (uint32_t j = 0; j < 64u; j++)
        want += counts[j] * top_p_weight_of(64u * t + j, kTopPCoarse, kTopPFine);
      const uint64_t got =
          top_p_class_mass(t, kTopPCoarse, kTopPFine, [&](int i, uint32_t* w, uint32_t* j) {
            const uint32_t x = (uint32_t(i) + t) & 31u;
            *w = counts[2 * x] | counts[2 * x + 1] << 16;
            *j = 2u * x;
          });
      differ += got != want;
    }
  }
  CHECK(differ == 0);
  CHECK(top_p_weight_f(kTopPCoarse[0], kTopPFine[0]) == 1u << 31);  // q = 0: w = 2^40
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

// Draw stream 4: with top-p on, the token is the first of the kept prefix (z descending, lower
// id first) whose cumulative weight exceeds r = top_p_draw_point(seed, sample, draw, M), M the
// prefix's summed weight. The row below: p = softmax ≈ .437 (id 4), .265 (6), .161 (1), .059
// (0), .036 (2), ...; top_p 0.9 keeps 4, 6, 1, 0 (cumulative .437, .701, .862, .921).
static const std::vector<float> kDrawRow = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 2.5f, -0.5f};

// The first of `ids` whose cumulative weight exceeds r (ids[0] when none does: mass 0).
static int32_t inverse_cdf(const std::vector<int32_t>& ids, const std::vector<uint64_t>& w,
                           uint64_t r) {
  uint64_t cum = 0;
  for (size_t j = 0; j < ids.size(); j++) {
    cum += w[j];
    if (r < cum) return ids[j];
  }
  return ids[0];
}

TEST_CASE("top_p_draw_point: the high 64 bits of U · M, U the words 0 and 1 of group 0xffffffff") {
  // Philox(counter (0xffffffff, 0, 0, 0), key 0) = c5b20a9d 4434ec4e ...: U = 0x4434ec4ec5b20a9d.
  const Philox4 p = philox4x32_10(0xffffffffu, 0, 0, 0, 0, 0);
  CHECK(p.v[0] == 0xc5b20a9du);
  CHECK(p.v[1] == 0x4434ec4eu);
  CHECK(top_p_draw_point(0, 0, 0, uint64_t(1) << 40) == 0x4434ec4ec5ull);  // U >> 24
  CHECK(top_p_draw_point(0, 0, 0, ~uint64_t(0)) == 4914812916436437660ull);
  CHECK(top_p_draw_point(0, 0, 0, 0) == 0u);
  // scripts/loom_sampler.py's top_p_draw_point gives the same.
  CHECK(top_p_draw_point(0x123456789abcull, 3, 0x500000007ull, 1000003) == 427301u);
  for (uint64_t d = 0; d < 1000; d++) CHECK(top_p_draw_point(5, 1, d, 7) < 7u);
}

TEST_CASE("top-p draws by inverse CDF over the kept prefix's integer weights (stream 4)") {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.9f;
  const std::vector<int32_t> kept = {4, 6, 1, 0};
  REQUIRE(sample_kept(kDrawRow.data(), 8, sp) == kept);
  // 2^40 · 2^-u, u = (3 - z) log2 e rounded down to 1/4096 (zmax = 3, id 4); loom_sampler.py's.
  const std::vector<uint64_t> w = {1099511627776ull, 666959680512ull, 404506813440ull,
                                   148816763520ull};
  for (size_t j = 0; j < kept.size(); j++)
    CHECK(top_p_weight(kDrawRow[size_t(kept[j])], 3.0f) == w[j]);
  const uint64_t mass = 2319794885248ull;
  CHECK(w[0] + w[1] + w[2] + w[3] == mass);
  for (uint64_t seed : {1ull, 2ull, 77ull, 0xfedcba9876543210ull})
    for (uint32_t sample : {0u, 3u})
      for (uint64_t d : {0ull, 1ull, 2ull, 5ull, 31ull, 0x100000000ull}) {
        CAPTURE(seed);
        CAPTURE(sample);
        CAPTURE(d);
        sp.seed = seed;
        const uint64_t r = top_p_draw_point(seed, sample, d, mass);
        CHECK(sample_token(kDrawRow.data(), 8, sp, sample, d) == inverse_cdf(kept, w, r));
      }
  // Known answers of scripts/loom_sampler.py (sample 0, draws 0..7); Gumbel-max over the same
  // kept set gives other tokens.
  const std::vector<int32_t> want1 = {6, 4, 1, 6, 0, 6, 4, 6}, want2 = {1, 4, 4, 6, 0, 4, 4, 1};
  std::vector<int32_t> got1, got2;
  for (uint64_t d = 0; d < 8; d++) {
    sp.seed = 1;
    got1.push_back(sample_token(kDrawRow.data(), 8, sp, 0, d));
    sp.seed = 2;
    got2.push_back(sample_token(kDrawRow.data(), 8, sp, 0, d));
  }
  CHECK(got1 == want1);
  CHECK(got2 == want2);
}

TEST_CASE("top-p draw frequencies are w / M of the kept prefix, none outside it") {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.9f;
  sp.seed = 2027;
  const std::vector<int32_t> kept = {4, 6, 1, 0};
  const std::vector<double> share = {
      1099511627776.0 / 2319794885248.0, 666959680512.0 / 2319794885248.0,
      404506813440.0 / 2319794885248.0, 148816763520.0 / 2319794885248.0};
  const int n = 20000;
  std::vector<int> count(8, 0);
  for (int i = 0; i < n; i++) count[size_t(sample_token(kDrawRow.data(), 8, sp, 1, uint64_t(i)))]++;
  for (int32_t id : {2, 3, 5, 7}) CHECK(count[size_t(id)] == 0);
  for (size_t j = 0; j < kept.size(); j++) {
    const double p = share[j], sd = std::sqrt(p * (1 - p) / n);
    CAPTURE(kept[j]);
    CHECK(std::fabs(count[size_t(kept[j])] / double(n) - p) < 4 * sd);
  }
}

TEST_CASE("top-p with every weight 0 draws the first of the prefix") {
  // zmax = +inf: inf - inf is NaN and inf - z is inf, so every weight is 0; the prefix is the
  // first token alone (the target ceil(P · 0 / 2^40) = 0 is reached at once).
  const std::vector<float> inf_row = {0.0f, 1.0f, INFINITY, 2.0f, INFINITY};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.9f;
  CHECK(sample_kept(inf_row.data(), 5, sp) == std::vector<int32_t>{2});
  for (uint64_t d = 0; d < 200; d++) CHECK(sample_token(inf_row.data(), 5, sp, 0, d) == 2);
  // Every z -inf: zmax = -inf, every weight 0 (NaN), the prefix is id 0.
  const std::vector<float> dead(5, -INFINITY);
  CHECK(sample_kept(dead.data(), 5, sp) == std::vector<int32_t>{0});
  for (uint64_t d = 0; d < 200; d++) CHECK(sample_token(dead.data(), 5, sp, 0, d) == 0);
}

TEST_CASE("top-k with top-p draws by inverse CDF too; top-k alone stays Gumbel-max") {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 3;
  sp.top_p = 0.9f;
  sp.seed = 3;
  // Top-k keeps 4, 6, 1 (cumulative weight .506, .814, 1 of theirs): top-p keeps all three.
  const std::vector<int32_t> kept = {4, 6, 1};
  REQUIRE(sample_kept(kDrawRow.data(), 8, sp) == kept);
  const std::vector<uint64_t> w = {1099511627776ull, 666959680512ull, 404506813440ull};
  const uint64_t mass = w[0] + w[1] + w[2];
  std::vector<int32_t> got;
  for (uint64_t d = 0; d < 12; d++) {
    CAPTURE(d);
    got.push_back(sample_token(kDrawRow.data(), 8, sp, 0, d));
    CHECK(got.back() == inverse_cdf(kept, w, top_p_draw_point(3, 0, d, mass)));
  }
  CHECK(got == std::vector<int32_t>{6, 6, 1, 4, 6, 6, 1, 4, 6, 4, 1, 4});  // loom_sampler.py's
  // The same kept set without top-p: Gumbel-max, z[i] + gumbel_noise(philox_uniform(i)).
  sp.top_p = 1.0f;
  for (uint64_t d = 0; d < 12; d++) {
    int32_t best = -1;
    float best_v = -INFINITY;
    for (int32_t i : kept) {
      const float v = kDrawRow[size_t(i)] + gumbel_noise(philox_uniform(3, 0, d, uint32_t(i)));
      if (best < 0 || v > best_v || (v == best_v && i < best)) best = i, best_v = v;
    }
    CAPTURE(d);
    CHECK(sample_token(kDrawRow.data(), 8, sp, 0, d) == best);
  }
}
