// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind every random draw in loom. A draw is a pure function of
// (key, counter), so a job's tokens do not depend on the batch it ran in, on the batch size,
// or on the backend. Usable from host and device code; scripts/hf_reference.py mirrors it.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_HD __host__ __device__ __forceinline__
#else
#define LOOM_HD inline
#endif

namespace loom {

struct Philox4 {
  uint32_t v[4];
};

// The round keys of a Philox4x32-10 key (k0, k1): round r's are k0 + r W0 and k1 + r W1. A loop
// over many counters with one key takes them once (kernels/sampling.cu's draw).
struct PhiloxKeys {
  uint32_t k0[10], k1[10];
};
LOOM_HD PhiloxKeys philox_keys(uint32_t k0, uint32_t k1) {
  PhiloxKeys k;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int r = 0; r < 10; r++) {
    k.k0[r] = k0 + uint32_t(r) * 0x9E3779B9u;
    k.k1[r] = k1 + uint32_t(r) * 0xBB67AE85u;
  }
  return k;
}

LOOM_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                              const PhiloxKeys& k) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int r = 0; r < 10; r++) {
#if defined(__CUDA_ARCH__)
    // 32-bit multiplies (IMAD.HI + IMAD): from the 64-bit form below nvcc emitted full 64-bit
    // multiplies (mul.lo.s64), a third of the device draw's instructions.
    const uint32_t hi0 = __umulhi(M0, c0), lo0 = M0 * c0;
    const uint32_t hi1 = __umulhi(M1, c2), lo1 = M1 * c2;
#else
    const uint64_t p0 = uint64_t(M0) * c0;
    const uint64_t p1 = uint64_t(M1) * c2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
#endif
    c0 = hi1 ^ c1 ^ k.k0[r];
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k.k1[r];
    c3 = lo0;
  }
  return Philox4{{c0, c1, c2, c3}};
}
LOOM_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                              uint32_t k1) {
  return philox4x32_10(c0, c1, c2, c3, philox_keys(k0, k1));
}

// The uniform in (0, 1) of a Philox output word: its top 23 bits offset by half a step, so every
// value is exact in float and the largest is 1 - 2^-24, so -log(-log(u)) is always finite (with
// 24 bits, 2^24 - 1 + 0.5 rounds up to 2^24).
LOOM_HD float uniform_from_bits(uint32_t r) {
#if defined(__CUDA_ARCH__)
  // The same value from the bits: 1 + k 2^-23 minus (1 - 2^-24) is (k + 0.5) 2^-23, exact in
  // float; two integer/float ops instead of a quarter-rate int-to-float conversion.
  return __uint_as_float(0x3f800000u | (r >> 9)) - 0.99999994f;
#else
  return (float(r >> 9) + 0.5f) * (1.0f / 8388608.0f);
#endif
}

// The Philox output for tokens 4 g .. 4 g + 3 of the draw at `draw_index` of sample `sample` of a
// job seeded with `seed`: key = seed, counter = (g, draw lo, draw hi, sample); word j belongs to
// token 4 g + j. One call draws four consecutive tokens (curand's layout), so the device draw
// runs one Philox a four logits (draw stream 2; stream 1 took word 0 of counter token). A loop
// over g takes the seed's round keys once (philox_seed_keys).
LOOM_HD PhiloxKeys philox_seed_keys(uint64_t seed) {
  return philox_keys(uint32_t(seed), uint32_t(seed >> 32));
}
LOOM_HD Philox4 philox_group(const PhiloxKeys& seed_keys, uint32_t sample, uint64_t draw_index,
                             uint32_t g) {
  return philox4x32_10(g, uint32_t(draw_index), uint32_t(draw_index >> 32), sample, seed_keys);
}
LOOM_HD Philox4 philox_group(uint64_t seed, uint32_t sample, uint64_t draw_index, uint32_t g) {
  return philox_group(philox_seed_keys(seed), sample, draw_index, g);
}
// Recorded with results: tokens of another stream differ. 3 (loom 0.4.0): stream 2's Philox
// layout with top-p's masses in fixed point (core/top_p_weight.h); a top-p job's kept set could
// differ from stream 2's (fp64 masses) in its last token. 4 (loom 0.5.0): top-p rows draw by
// inverse CDF over the fixed-point weights (core/top_p_weight.h top_p_draw_point) instead of
// Gumbel-max; rows without top-p draw as in stream 3.
constexpr int kDrawStream = 4;

// Word j of r, by selects (no local-memory array on the device).
LOOM_HD uint32_t philox_word(const Philox4& r, uint32_t j) {
  return (j & 2u) ? ((j & 1u) ? r.v[3] : r.v[2]) : ((j & 1u) ? r.v[1] : r.v[0]);
}

// The uniform that token `token` gets for that draw.
LOOM_HD float philox_uniform(uint64_t seed, uint32_t sample, uint64_t draw_index, uint32_t token) {
  return uniform_from_bits(
      philox_word(philox_group(seed, sample, draw_index, token >> 2), token & 3u));
}

// The Gumbel noise -log(-log(u)) of that uniform, computed in double and rounded once to
// float, so backends whose log functions differ in the last bit still agree (all but ~2^-29
// of draws), unlike float logf, whose implementations differ far more often.
LOOM_HD float gumbel_noise(float u) {
  return float(-log(-log(double(u))));
}

// A float estimate of gumbel_noise(u), within kGumbelEstimateErr of it for every u that
// philox_uniform returns (all 2^23 values are checked, on the host by tests/test_sampler.cpp and
// on the device by tests/cuda/ops/test_sampling.cpp). The device draw ranks logits with it and
// computes the exact noise only for those that can still win (kernels/sampling.cu).
constexpr float kGumbelEstimateErr = 1e-5f;
LOOM_HD float gumbel_noise_estimate(float u) {
#if defined(__CUDA_ARCH__)
  // -log(u): near 1 (u > 15/16) the series of -log1p(-w), w = 1 - u exact in float, to five
  // terms (relative error < w^5 / 6 < 2e-7), else the fast log (absolute 2^-21.4 on |log u| >=
  // 0.0645); then the fast log of that. Cheaper than logf's range reduction, a third of the
  // sampled draw's non-Philox work. The fast log is __logf without its subnormal scaling
  // (lg2.approx.ftz): u >= 2^-24 and -log u >= 2^-24 are never subnormal.
  auto fast_log = [](float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y * 0.693147180559945f;
  };
  const float w = 1.0f - u;
  const float l = w < 0.0625f ? w * (1.0f + w * (0.5f + w * (1.0f / 3.0f + w * (0.25f + w * 0.2f))))
                              : -fast_log(u);
  return -fast_log(l);
#else
  return -std::log(-std::log(u));
#endif
}

}  // namespace loom
