#include "backend/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "core/philox.h"
#include "core/top_p_weight.h"

namespace loom {

static int32_t argmax(const float* x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

// z = logits / temperature, [vocab].
static std::vector<float> scaled(const float* logits, int vocab, float temperature) {
  std::vector<float> z(size_t(vocab), 0.0f);
  for (int i = 0; i < vocab; i++) z[size_t(i)] = logits[i] / temperature;
  return z;
}

// The kept set in order (empty: no filter); with top-p on, `weights` (when given) gets the kept
// tokens' top-p weights in the same order.
static std::vector<int32_t> kept_of(const std::vector<float>& z, const SamplingParams& params,
                                    std::vector<uint64_t>* weights = nullptr) {
  const int vocab = int(z.size());
  const bool top_k_on = params.top_k_on(vocab);
  const bool top_p_on = params.top_p_on();
  if (!top_k_on && !top_p_on) return {};
  std::vector<uint32_t> key(static_cast<size_t>(vocab));  // [vocab]
  for (int i = 0; i < vocab; i++) key[size_t(i)] = order_key(z[size_t(i)]);
  std::vector<int32_t> kept(static_cast<size_t>(vocab));
  std::iota(kept.begin(), kept.end(), 0);
  auto before = [&](int32_t a, int32_t b) {
    return key[size_t(a)] > key[size_t(b)] || (key[size_t(a)] == key[size_t(b)] && a < b);
  };
  size_t n = size_t(vocab);
  if (top_k_on) {
    n = size_t(params.top_k);
    std::partial_sort(kept.begin(), kept.begin() + long(n), kept.end(), before);
  } else {
    std::sort(kept.begin(), kept.end(), before);
  }
  if (top_p_on) {  // masses in fixed point (core/top_p_weight.h), exact in any order
    float zmax = -INFINITY;
    for (float v : z) zmax = std::fmax(zmax, v);
    std::vector<uint64_t> w(n);  // [n] the kept prefix's weights, in order
    uint64_t mass = 0;
    for (size_t j = 0; j < n; j++) mass += w[j] = top_p_weight(z[size_t(kept[j])], zmax);
    const uint64_t target = top_p_target(params.top_p, mass);
    uint64_t cum = 0;
    size_t m = 0;
    while (m < n) {
      cum += w[m++];
      if (cum >= target) break;
    }
    n = m;
    if (weights) {
      w.resize(n);
      *weights = std::move(w);
    }
  }
  kept.resize(n);
  return kept;
}

std::vector<int32_t> sample_kept(const float* logits, int vocab, const SamplingParams& params) {
  if (params.temperature <= 0.0f) return {};
  return kept_of(scaled(logits, vocab, params.temperature), params);
}

int32_t sample_token(const float* logits, int vocab, const SamplingParams& params,
                     uint32_t sample_index, uint64_t draw_index) {
  if (params.temperature <= 0.0f) return argmax(logits, vocab);
  const std::vector<float> z = scaled(logits, vocab, params.temperature);
  std::vector<uint64_t> w;                                   // [kept] top-p weights (top-p on)
  const std::vector<int32_t> kept = kept_of(z, params, &w);  // empty: every id is a candidate
  if (params.top_p_on()) {  // inverse CDF over the kept weights (draw stream 4)
    uint64_t mass = 0;
    for (uint64_t v : w) mass += v;
    const uint64_t r = top_p_draw_point(params.seed, sample_index, draw_index, mass);
    uint64_t cum = 0;
    for (size_t j = 0; j < kept.size(); j++)
      if ((cum += w[j]) > r) return kept[j];
    return kept[0];  // mass 0: the first of the prefix
  }

  int32_t best = -1;
  float best_v = -INFINITY;
  auto consider = [&](int32_t i, float u) {
    const float v = z[size_t(i)] + gumbel_noise(u);
    if (best < 0 || v > best_v || (v == best_v && i < best)) {
      best = i;
      best_v = v;
    }
  };
  if (kept.empty()) {  // every id: one Philox call for each group of four (draw stream 2)
    for (int32_t g = 0; 4 * g < vocab; g++) {
      const Philox4 r = philox_group(params.seed, sample_index, draw_index, uint32_t(g));
      for (int32_t j = 0; j < 4 && 4 * g + j < vocab; j++)
        consider(4 * g + j, uniform_from_bits(r.v[j]));
    }
  } else {
    for (int32_t i : kept)
      consider(i, philox_uniform(params.seed, sample_index, draw_index, uint32_t(i)));
  }
  return best;
}

}  // namespace loom
