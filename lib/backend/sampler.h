// Token sampling, identical on every backend given equal logits (design §7).
//
//   1. temperature 0 → argmax (lowest id on ties); nothing random is drawn.
//   2. z = logits / temperature; p = softmax(z).
//   3. top-k (k > 0): keep the k largest z (ties broken by lower id; z ordered by its bits as
//      the device orders it: +0 above -0).
//   4. top-p (< 1): over the kept tokens in that order, keep the shortest prefix whose mass
//      reaches top_p of theirs (at least one token), masses in fixed point: integer weights of
//      2^-((zmax - z) log2 e) quantised to 1/4096 (core/top_p_weight.h, "top-p mass 2"), summed
//      exactly, so that every backend keeps the same set.
//   5. draw, top-p on (with or without top-k; draw stream 4): inverse CDF over step 4's weights.
//      With M the kept prefix's summed weight and r = top_p_draw_point(seed, sample, draw_index,
//      M) (floor(U · M / 2^64), U the 64 bits of a Philox call of its own: core/top_p_weight.h),
//      the token is the first of the prefix, in order, whose cumulative weight exceeds r (M = 0:
//      the first of the prefix): each kept token with probability w / M, from the sums the
//      filter already makes, no noise per token.
//      Otherwise (no filter, or top-k alone): argmax over kept tokens of z[i] + g[i] (float),
//      g[i] = gumbel_noise(u[i]) (the double -log(-log(u)) rounded to float), u[i] =
//      philox_uniform(seed, sample, draw_index, i) — the Gumbel-max trick, an exact draw from
//      softmax(z) restricted to the kept set, and embarrassingly parallel over the vocab.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace loom {

int32_t sample_token(const float* logits, int vocab, const SamplingParams& params,
                     uint32_t sample_index, uint64_t draw_index);

// Steps 3-4's kept set in order (p descending, lower id first); empty when neither filter is on
// or the temperature is 0 (every id is a candidate).
std::vector<int32_t> sample_kept(const float* logits, int vocab, const SamplingParams& params);

}  // namespace loom
