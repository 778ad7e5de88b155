// Top-p's probability mass in fixed point (sampling definition §4, "top-p mass 2"): the weight of
// a token is an integer computed from its z = logit / temperature by the same IEEE fp32
// operations and integer tables on every backend, and masses are sums of those integers, exact
// in any order. So the device sampler's kept set equals the CPU's by construction (an fp64 mass
// summed in another order could differ in the last bit), and the device histograms add integers
// (native shared-memory atomics) instead of fp64 compare-and-swap loops.
//
//   u = (zmax - z) · log2(e)                          (fp32: one subtraction, one product)
//   q = floor(u · 4096)                               (u < 40; else, and for NaN, weight 0)
//   F = coarse[(q >> 6) & 63] · fine[q & 63] >> 31    (≈ 2^31 · 2^-((q & 4095) / 4096))
//   w = (F << 9) >> (q >> 12)                         (≈ 2^40 · 2^-u, u rounded down to 1/4096)
//
// Weights are at most 2^40, so a row of fewer than 2^24 tokens sums below 2^64. The relative
// step of the quantised u is 2^(1/4096) - 1 ≈ 1.7e-4; tokens more than 40 / log2(e) ≈ 27.7
// units of z below the largest weigh 0 (their share of the mass is below 2^-40 each).
// The kept prefix (order: z descending, lower id first) is the shortest whose cumulative weight
// reaches top_p_target(p, M) = ceil(P · M / 2^40), M the total, P = floor(p · 2^40) (p itself for
// p >= 2^-17); at least one token.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/philox.h"  // LOOM_HD

namespace loom {

// round(2^31 · 2^(-i/64)) and round(2^31 · 2^(-i/4096)), i in [0, 64):
// scripts/gen_top_p_weight_tables.py.
#define LOOM_TOP_P_COARSE                                                                        \
  2147483648u, 2124350982u, 2101467502u, 2078830522u, 2056437387u, 2034285470u, 2012372174u,     \
      1990694927u, 1969251188u, 1948038440u, 1927054196u, 1906295993u, 1885761398u, 1865448001u, \
      1845353420u, 1825475297u, 1805811301u, 1786359126u, 1767116489u, 1748081133u, 1729250827u, \
      1710623359u, 1692196547u, 1673968228u, 1655936265u, 1638098541u, 1620452965u, 1602997467u, \
      1585730000u, 1568648537u, 1551751076u, 1535035634u, 1518500250u, 1502142985u, 1485961921u, \
      1469955159u, 1454120821u, 1438457051u, 1422962010u, 1407633882u, 1392470869u, 1377471191u, \
      1362633090u, 1347954824u, 1333434672u, 1319070932u, 1304861917u, 1290805962u, 1276901417u, \
      1263146652u, 1249540052u, 1236080024u, 1222764986u, 1209593378u, 1196563654u, 1183674286u, \
      1170923762u, 1158310587u, 1145833280u, 1133490379u, 1121280436u, 1109202018u, 1097253708u, \
      1085434106u
#define LOOM_TOP_P_FINE                                                                          \
  2147483648u, 2147120270u, 2146756953u, 2146393698u, 2146030505u, 2145667373u, 2145304302u,     \
      2144941293u, 2144578345u, 2144215459u, 2143852634u, 2143489870u, 2143127168u, 2142764527u, \
      2142401948u, 2142039429u, 2141676973u, 2141314577u, 2140952243u, 2140589970u, 2140227759u, \
      2139865609u, 2139503520u, 2139141492u, 2138779525u, 2138417620u, 2138055776u, 2137693994u, \
      2137332272u, 2136970612u, 2136609013u, 2136247475u, 2135885998u, 2135524583u, 2135163228u, \
      2134801935u, 2134440703u, 2134079532u, 2133718422u, 2133357373u, 2132996386u, 2132635459u, \
      2132274593u, 2131913789u, 2131553046u, 2131192363u, 2130831742u, 2130471182u, 2130110682u, \
      2129750244u, 2129389867u, 2129029550u, 2128669295u, 2128309101u, 2127948967u, 2127588895u, \
      2127228883u, 2126868932u, 2126509043u, 2126149214u, 2125789446u, 2125429739u, 2125070092u, \
      2124710507u
constexpr uint32_t kTopPCoarse[64] = {LOOM_TOP_P_COARSE};
constexpr uint32_t kTopPFine[64] = {LOOM_TOP_P_FINE};

constexpr uint32_t kTopPNoWeight = 0xffffffffu;  // top_p_quantum of a token that weighs 0

// The order of a kept prefix: z descending by these order-preserving bits (a < b ⇔ key(a) <
// key(b); +0 above -0, a NaN by its sign bit above or below every number), lower id first.
LOOM_HD uint32_t order_key(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// floor(u · 4096) for u in [0, 40]. On the device the low bits of u · 4096 + 2^23 rounded toward
// zero (exact: u · 4096 is, and below 2^23 the sum's unit is 1): two full-rate operations for a
// quarter-rate F2I (tests/cuda/test_sampling_noise.cu checks every u in [0, 40)).
LOOM_HD uint32_t top_p_floor_4096(float u) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(__fmaf_rz(u, 4096.0f, 8388608.0f)) - 0x4b000000u;
#else
  return uint32_t(u * 4096.0f);
#endif
}

// q of u = (zmax - z) · log2(e) >= 0, or kTopPNoWeight (u >= 40, NaN).
LOOM_HD uint32_t top_p_quantum_of_u(float u) {
  return u < 40.0f ? top_p_floor_4096(u) : kTopPNoWeight;
}

// u of the definition above for z <= zmax (u >= 0: zmax is the largest z).
LOOM_HD float top_p_u(float z, float zmax) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(__fsub_rn(zmax, z), 1.44269504088896341f);  // no FMA
#else
  return (zmax - z) * 1.44269504088896341f;
#endif
}

// q of the definition above, or kTopPNoWeight, for z <= zmax.
LOOM_HD uint32_t top_p_quantum(float z, float zmax) {
  return top_p_quantum_of_u(top_p_u(z, zmax));
}

// The quantum the fp32 filter's count pass takes: q for u < 40, and kTopPPastQuanta (40 << 12)
// for u >= 40 and a NaN, which top_p_tail_weight weighs 0 as it does kTopPNoWeight. fminf passes
// a NaN's other operand, so there is no test: a product, a min and an add on the device.
// top_p_count_biased is that quantum plus kTopPQuantumBias, the bits of the device's sum before
// the subtraction, which the count pass tests and indexes by directly (q's low 23 bits are the
// sum's).
constexpr uint32_t kTopPPastQuanta = 40u << 12;
constexpr uint32_t kTopPQuantumBias = 0x4b000000u;  // 2^23's bits
LOOM_HD uint32_t top_p_count_biased(float z, float zmax) {
#if defined(__CUDA_ARCH__)
  // u · 4096 as one product by log2(e)'s float times 2^12 (exact: scaling by 2^12 commutes with
  // the rounding, and a u too small for that has q = 0 either way), then floor by the low bits
  // of a sum with 2^23 rounded toward zero: no FMA with two constants (a register move a logit).
  const float u4096 = fminf(__fmul_rn(__fsub_rn(zmax, z), 1.44269504088896341f * 4096.0f),
                            float(kTopPPastQuanta));
  return __float_as_uint(__fadd_rz(u4096, 8388608.0f));
#else
  return top_p_floor_4096(fminf(top_p_u(z, zmax), 40.0f)) + kTopPQuantumBias;
#endif
}
LOOM_HD uint32_t top_p_count_quantum(float z, float zmax) {
  return top_p_count_biased(z, zmax) - kTopPQuantumBias;
}

// F of the definition above from q's table entries: at most 2^31 (both entries are).
LOOM_HD uint32_t top_p_weight_f(uint32_t coarse, uint32_t fine) {
  return uint32_t((uint64_t(coarse) * fine) >> 31);
}

// w of the definition above from q (kTopPNoWeight: 0), the tables where the caller keeps them.
LOOM_HD uint64_t top_p_weight_of(uint32_t q, const uint32_t* coarse, const uint32_t* fine) {
  if (q == kTopPNoWeight) return 0u;
  return (uint64_t(top_p_weight_f(coarse[(q >> 6) & 63u], fine[q & 63u])) << 9) >> (q >> 12);
}

// top_p_weight_of for q >= 16 << 12 (u >= 16), kTopPNoWeight or kTopPPastQuanta, from q's F
// (top_p_weight_f) and b = q + kTopPQuantumBias (top_p_count_biased), in 32-bit operations: F is
// below 2^32 and, with s = q >> 12 >= 16, (F << 9) >> s = F >> (s - 9) (the bits shifted in are
// zeros). u < 40 shifts F by at most 30; kTopPNoWeight and kTopPPastQuanta (a shift of 31 or
// more) weigh 0. The fp32 top-p filter weighs every token past its classes so (~95% of a
// sigma-4 row's), F from a table by q & 4095; tests/test_sampler.cpp compares it with
// top_p_weight_of over every such q.
LOOM_HD uint32_t top_p_tail_weight(uint32_t f, uint32_t b) {
  const uint32_t s = (b >> 12) - ((kTopPQuantumBias >> 12) + 9u);  // (the bias's low 12 bits: 0)
  return s < 31u ? f >> s : 0u;
}

// The total weight of the 64 quanta q = 64 t + j, j < 64 (t < 1024: u < 16), as the fp32
// filter's class scan sums a thread's classes from their 16-bit counts, two a word:
// word_at(i, &w, &j) gives the i-th of the 32 words (i < 32, in any order), the count of class
// j (even) in its low half and of j + 1 in its high half. The classes share coarse[t & 63] and
// the shift s = t >> 6, and F fits 32 bits, so a class costs a 32-bit F and a widening
// multiply-add: for s >= 9, w = F >> (s - 9) (the bits (F << 9) >> s drops are F's low ones);
// for s < 9, w = F << (9 - s), a factor taken out of the sum (exact: the sum of c F is below
// 2^53). tests/test_sampler.cpp compares it with top_p_weight_of.
template <class WordAt>
LOOM_HD uint64_t top_p_class_mass(uint32_t t, const uint32_t* coarse, const uint32_t* fine,
                                  WordAt word_at) {
  const uint32_t k = coarse[t & 63u], s = t >> 6;
  uint64_t m = 0u;
  auto sum = [&](auto weigh) {
    for (int i = 0; i < 32; i++) {
      uint32_t w, j;
      word_at(i, &w, &j);
      m += uint64_t(w & 0xffffu) * weigh(fine[j]) + uint64_t(w >> 16) * weigh(fine[j + 1]);
    }
  };
  if (s >= 9u) {
    sum([&](uint32_t f) { return top_p_weight_f(k, f) >> (s - 9u); });
    return m;
  }
  sum([&](uint32_t f) { return top_p_weight_f(k, f); });
  return m << (9u - s);
}

// The weight with the tables above (host code; device code keeps its own copy of the tables).
inline uint64_t top_p_weight(float z, float zmax) {
  return top_p_weight_of(top_p_quantum(z, zmax), kTopPCoarse, kTopPFine);
}

// ceil(P · total / 2^40), P = floor(p · 2^40) (p <= 1).
LOOM_HD uint64_t top_p_target(float p, uint64_t total) {
  const uint64_t P = uint64_t(double(p) * 1099511627776.0);  // 2^40
#if defined(__CUDA_ARCH__)
  uint64_t lo = P * total, hi = __umul64hi(P, total);
  const uint64_t add = (uint64_t(1) << 40) - 1u;
  hi += (lo + add) < lo;
  lo += add;
  return (hi << 24) | (lo >> 40);
#else
  const unsigned __int128 x = (unsigned __int128)P * total + ((uint64_t(1) << 40) - 1u);
  return uint64_t(x >> 40);
#endif
}

// Draw stream 4: a row with top-p on draws by inverse CDF over its kept prefix (the order
// above) with these integer weights, instead of Gumbel-max over it: with M the kept prefix's
// total weight, r = floor(U · M / 2^64) for U = (v[1] << 32) | v[0] of philox_group(seed,
// sample, draw_index, kTopPDrawGroup), and the token is the first of the prefix whose cumulative
// weight exceeds r (M = 0: the first of the prefix). Each kept token is drawn with probability
// w / M exactly (up to U's 2^-64 steps), so the draw needs no noise for the ~60% of a row a
// filter keeps, only the sums the filter already makes; the weights' 1/4096 steps of u make a
// probability differ from softmax's by at most 2^(1/4096) - 1 ≈ 1.7e-4 of itself.
constexpr uint32_t kTopPDrawGroup = 0xffffffffu;  // no token's group (4 g + 3 < 2^32 ids)
LOOM_HD uint64_t top_p_draw_point(uint64_t seed, uint32_t sample, uint64_t draw_index,
                                  uint64_t kept_mass) {
  const Philox4 p = philox_group(seed, sample, draw_index, kTopPDrawGroup);
  const uint64_t u = (uint64_t(p.v[1]) << 32) | p.v[0];
#if defined(__CUDA_ARCH__)
  return __umul64hi(u, kept_mass);
#else
  return uint64_t(((unsigned __int128)u * kept_mass) >> 64);
#endif
}

}  // namespace loom
