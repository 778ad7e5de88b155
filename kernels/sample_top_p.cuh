// Top-p's cut and draw stream 4's token (core/top_p_weight.h) in the sampling filter
// (kernels/sampling.cu's sample_filter_kernel), one block of kFilterThreads a row:
//   top_p_by_values — top-p alone over bf16 logits, from one count a bf16 value: a value's
//     tokens share one z, one key and one weight, so the counts give every mass, the cut and the
//     draw point's value, and one gathering pass the ids of the two values whose ties they split;
//   top_p_by_quanta — top-p alone over fp32 logits, the same from one count a weight quantum
//     (a token's weight depends on its quantum alone) after the zmax pass;
//   mass_select — any row: the selects of sample_select.cuh (z bins, digit bins, the radix
//     select), once for the cut and once, over the kept set, for the drawn token.
// Device code, included by sampling.cu only.
#pragma once

#include <cfloat>
#include <climits>
#include <cstddef>

#include "kernels/sample_select.cuh"

namespace loom::gpu {

// The smallest id with key thr among the elements in the filter (thr, cut): the first of the
// kept prefix's ties at thr, which is the first of the prefix when thr is its largest key.
template <class T>
__device__ int first_id_at(const T* logits, int vocab, float temperature, uint32_t thr, int cut) {
  __shared__ int first_s;
  if (threadIdx.x == 0) first_s = INT_MAX;
  __syncthreads();
  const ZOf z_of(temperature);
  int mine = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x)
    if (float_key(z_of(logit_at(logits, i))) == thr && i <= cut) mine = min(mine, i);
  if (mine != INT_MAX) atomicMin(&first_s, mine);
  __syncthreads();
  const int first = first_s;
  __syncthreads();
  return first;
}

// A mass select over the elements in the filter (thr0, cut0) with the target rule(m) of their
// total weight m: the z bins, then the digit bins, then the radix select. Returns false where m
// is 0 (every weight 0), having set (out_thr, out_cut) to the first element in order. With draw,
// the z bins also draw stream 4's token over the selected prefix where they can (*drawn, else
// left as it was).
template <class T>
__device__ bool mass_select(const T* lg, int vocab, float t, SelectWeight mass, uint32_t thr0,
                            int cut0, const MassTarget& rule, uint32_t* out_thr, int* out_cut,
                            Mass* scratch, BinSmem& sm, const MassTarget* draw = nullptr,
                            int* drawn = nullptr) {
  if (z_bin_select(lg, vocab, t, mass, thr0, cut0, rule, out_thr, out_cut, scratch, sm, draw,
                   drawn) ||
      bin_select(lg, vocab, t, mass, thr0, cut0, 0u, rule, out_thr, out_cut, scratch, sm))
    return true;
  Mass m = 0u;
  const ZOf z_of(t);
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float z = z_of(logit_at(lg, i));
    if (in_filter(float_key(z), i, thr0, cut0)) m += mass(z);
  }
  m = block_sum(m, scratch);
  const SelectWeight count{false, mass.zmax, mass.tables};
  if (m == 0u) {  // an infinite zmax, or the filter's set all NaN: the first in order
    radix_select(lg, vocab, t, count, thr0, cut0, 1u, out_thr, out_cut, scratch, sm);
    return false;
  }
  radix_select(lg, vocab, t, mass, thr0, cut0, rule(m), out_thr, out_cut, scratch, sm);
  return true;
}

// The class histograms of top_p_by_values and top_p_by_quanta: 65,536 16-bit counts, two a
// word (class h in the low half of word h / 2 when h is even), over BinSmem's count, mass, incl
// and cand (none live while it is); then the same bytes hold the gathered candidates.
constexpr int kClassWords = 32768, kClasses = 2 * kClassWords;
static_assert(kClasses == 16 << 12, "top_p_tail_weight's q start at u = 16");
constexpr int kClassesPerThread = kClasses / kFilterThreads;  // the scan's share: 64
static_assert(offsetof(BinSmem, ring) >= size_t(kClassWords) * 4, "the class counts fit");
static_assert(offsetof(BinSmem, ring) >= size_t(2 * kBinCand) * 8, "two candidate lists fit");
// top_p_by_quanta's table of F by q & 4095 (core/top_p_weight.h), after the class counts.
constexpr int kTopPFWords = 4096;
static_assert(offsetof(BinSmem, ring) >= size_t(kClassWords + kTopPFWords) * 4, "F's table fits");

__device__ __forceinline__ void zero_classes(uint32_t* hist) {
  for (int j = threadIdx.x; j < kClassWords; j += blockDim.x) hist[j] = 0u;
}
__device__ __forceinline__ void count_class(uint32_t* hist, uint32_t h) {
  atomicAdd(&hist[h >> 1], 1u + (h & 1u) * 0xffffu);
}
__device__ __forceinline__ uint32_t class_count(const uint32_t* hist, uint32_t h) {
  return (hist[h >> 1] >> ((h & 1u) * 16u)) & 0xffffu;
}
// The s-th (s < kClassesPerThread) of the calling thread's classes 64 t .. 64 t + 63, the order
// of a pass over them: they are 32 consecutive words, and lane l starts at its class l (word
// l / 2), or a warp's lanes would read one bank at a time.
__device__ __forceinline__ uint32_t thread_class(int s) {
  const int t = int(threadIdx.x);
  return uint32_t(kClassesPerThread * t + ((s + (t & 31)) & (kClassesPerThread - 1)));
}

// Where top-p's cut and draw stream 4's draw fall among classes of equal weight in order (s = 0
// first; thread t holds s = 64 t .. 64 t + 63): the cut keeps the first j of class cut's tokens
// (from 1), the draw is the m-th of class draw's (from 0). ok: false where the classes' mass
// falls short of the cut's target (the cut lies in tokens past the classes).
struct ClassSplit {
  bool ok;
  uint32_t cut, draw;              // classes
  uint32_t cut_count, draw_count;  // their tokens
  int j, m;
};

// The split from class_at(s, &count, &weight), the thread's classes' mass and the row's total
// (classes and the tokens past them). Each target is found by a block scan of the threads'
// masses, then in the first reaching thread's warp (two of its classes a lane, a warp scan).
template <class ClassAt>
__device__ ClassSplit split_classes(ClassAt class_at, Mass mine, Mass total,
                                    const SampleParamsDev& p, Mass* scratch) {
  __shared__ int first_s;
  __shared__ uint32_t class_s, count_s;
  __shared__ Mass above_s, w_s;
  const int t0 = int(threadIdx.x), lane = t0 & 31;
  // limit: the cut class's tokens kept, where the draw searches the kept prefix only.
  auto find = [&](Mass thread_mass, Mass target, uint32_t limit_class, uint32_t limit_count,
                  Mass* all) {
    const Mass incl = block_scan(thread_mass, scratch, all);
    if (threadIdx.x == 0) first_s = kFilterThreads;
    __syncthreads();
    if (incl >= target) atomicMin(&first_s, t0);
    __syncthreads();
    const int f = first_s;
    if (f < kFilterThreads && (t0 >> 5) == (f >> 5)) {
      const Mass excl = __shfl_sync(0xffffffffu, incl - thread_mass, f & 31);
      const uint32_t s0 = uint32_t(kClassesPerThread * f + 2 * lane);  // classes s0, s0 + 1
      Mass m[2], w[2];
      uint32_t c[2];
      for (int q = 0; q < 2; q++) {
        class_at(s0 + q, &c[q], &w[q]);
        m[q] = (s0 + q == limit_class ? limit_count : c[q]) * w[q];
      }
      Mass x = m[0] + m[1];  // the warp's inclusive scan
      for (int o = 1; o < 32; o <<= 1) {
        const Mass y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
      }
      const Mass before = excl + x - m[0] - m[1];
      const unsigned hits = __ballot_sync(0xffffffffu, excl + x >= target);
      if (lane == __ffs(hits) - 1) {
        const int q = before + m[0] >= target ? 0 : 1;
        class_s = s0 + q, count_s = c[q], above_s = q == 0 ? before : before + m[0], w_s = w[q];
      }
    }
    __syncthreads();
    return incl;
  };
  ClassSplit r{};
  const Mass target = mass_target(p.top_p, total);
  Mass window;
  const Mass incl = find(mine, target, kClasses, 0u, &window);
  if (window < target) return r;
  r.cut = class_s, r.cut_count = count_s;
  const Mass cut_above = above_s, cut_w = w_s;
  r.j = int((target - cut_above + cut_w - 1) / cut_w);
  const Mass kept = cut_above + Mass(r.j) * cut_w;
  const int f = first_s;  // the kept prefix's mass a thread: all of it above f, none below
  const Mass mine_kept = t0 < f ? mine : t0 == f ? kept - (incl - mine) : 0u;
  const Mass point = top_p_draw_point(p.seed, p.sample_index, p.draw_index, kept);
  find(mine_kept, point + 1u, r.cut, uint32_t(r.j), &window);
  r.draw = class_s, r.draw_count = count_s;
  r.m = int((point - above_s) / w_s);
  r.ok = true;
  __syncthreads();
  return r;
}

// The candidate with exactly `rank` smaller ones among cand[0, n) (distinct), into *out.
template <class C>
__device__ __forceinline__ void ranked(const C* cand, int n, int rank, C* out) {
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    int below = 0;
    for (int g = 0; g < n; g++) below += cand[g] < cand[e];
    if (below == rank) *out = cand[e];
  }
}

// One pass gathers the tokens x with in_draw(x), and in_cut(x) where with_cut (the logits of the
// split's draw and cut classes), as candidates cand_at(i, x) (ordered as the kept prefix orders
// a class's tokens) into buf [kBinCand] and buf + kBinCand [kBinCand] (over BinSmem, outside
// sm.ring), and ranks them: *draw_out the m-th of the draw class, *cut_out the j-th of the cut
// class (not written without with_cut). Returns false (nothing written) where a gathered class
// has over kBinCand tokens, or a test took more or fewer than its class's count. The callers
// pick the tests a logit pays: bits or order keys compared, never a z or a class index (a z, a
// 64-bit candidate and a class index a logit cost the bf16 path ~50 us at 256 rows, H200,
// session 25).
template <class C, class T, class InDraw, class InCut, class CandAt>
__device__ bool gather_ranked(const T* lg, int vocab, const ClassSplit& split, bool with_cut,
                              InDraw in_draw, InCut in_cut, CandAt cand_at, C* buf, BinSmem& sm,
                              C* draw_out, C* cut_out) {
  __shared__ unsigned n_cut_s, n_draw_s;
  if (split.draw_count > unsigned(kBinCand) || (with_cut && split.cut_count > unsigned(kBinCand)))
    return false;
  C* draw = buf;            // [draw_count]
  C* cut = buf + kBinCand;  // [cut_count] where with_cut
  if (threadIdx.x == 0) n_cut_s = 0u, n_draw_s = 0u;
  __syncthreads();
  auto take = [&](int i, float x) {  // (the bounds only guard tests that disagree with a count)
    if (in_draw(x)) {
      const unsigned e = atomicAdd(&n_draw_s, 1u);
      if (e < unsigned(kBinCand)) draw[e] = cand_at(i, x);
    }
    if (with_cut && in_cut(x)) {
      const unsigned e = atomicAdd(&n_cut_s, 1u);
      if (e < unsigned(kBinCand)) cut[e] = cand_at(i, x);
    }
  };
  for_each_logit(
      lg, vocab, sm.ring,
      [&](int i, float x) {
        if (i < vocab) take(i, x);
      },
      take);
  __syncthreads();
  if (n_draw_s != split.draw_count || (with_cut && n_cut_s != split.cut_count)) return false;
  ranked(draw, int(split.draw_count), split.m, draw_out);
  if (with_cut) ranked(cut, int(split.cut_count), split.j - 1, cut_out);
  __syncthreads();
  return true;
}

// bf16 bits of the value at 16-bit key k (descending keys: descending values, +0 above -0).
__device__ __forceinline__ uint32_t value_at_key(uint32_t k) {
  return (k & 0x8000u) ? (k & 0x7fffu) : (~k & 0xffffu);
}

// Top-p alone over bf16 logits, with draw stream 4's token, from counts of the row's values: a
// value's tokens share one z, one key and one weight, so the classes are the values (class s:
// the value at key 0xffff - s), zmax is the largest value's z, and no pass finds it. Returns
// false (nothing written the caller reads; the caller runs mass_select) where a value's count
// passes 16 bits (the counted total falls short of vocab), a logit is not finite, two values
// share a z (z = x / t subnormal, or infinite), or a split value has over kBinCand tokens.
__device__ __forceinline__ bool top_p_by_values(const __nv_bfloat16* lg, int vocab,
                                                const SampleParamsDev& p, Mass* scratch,
                                                BinSmem& sm, uint32_t* out_thr, int* out_cut,
                                                int* drawn) {
  __shared__ uint32_t top_key_s;
  uint32_t* hist = reinterpret_cast<uint32_t*>(&sm);  // [kClassWords], indexed by the bf16 bits
  const ZOf z_of(p.temperature);
  zero_classes(hist);
  if (threadIdx.x == 0) top_key_s = 0u;
  __syncthreads();
  // (backward: the gathering pass after it starts where this one ends, in L2)
  for_each_logit<true>(lg, vocab, sm.ring, [&](int i, float x) {
    if (i < vocab) count_class(hist, __float_as_uint(x) >> 16);
  });
  __syncthreads();
  auto bits_at = [&](uint32_t s) { return value_at_key(0xffffu - s); };
  auto z_at = [&](uint32_t b) { return z_of(__uint_as_float(b << 16)); };
  // The row's values: their count, the largest, and whether any breaks the order's assumptions.
  uint32_t n = 0u, top = 0u;
  bool odd = false;
  for (int s = 0; s < kClassesPerThread; s++) {
    const uint32_t e = thread_class(s);
    const uint32_t b = bits_at(e), c = class_count(hist, b);
    if (c == 0u) continue;
    n += c;
    odd |= (b & 0x7fffu) >= 0x7f80u;  // infinite or NaN
    top = max(top, 0xffffu - e);
  }
  if (top != 0u) atomicMax(&top_key_s, top);
  if (block_sum(n, scratch) != Mass(vocab) || __syncthreads_or(odd)) return false;
  const SelectWeight mass{true, z_at(value_at_key(top_key_s)), sm.top_p_tables};
  Mass mine = 0u;
  for (int s = 0; s < kClassesPerThread; s++) {
    const uint32_t e = thread_class(s);
    const uint32_t b = bits_at(e), c = class_count(hist, b);
    if (c == 0u) continue;
    const float z = z_at(b);
    odd |= isinf(z) || ((b & 0x7fffu) != 0u && fabsf(z) < FLT_MIN);  // two values, one z
    mine += c * mass(z);
  }
  if (__syncthreads_or(odd)) return false;
  const ClassSplit split = split_classes(
      [&](uint32_t s, uint32_t* c, Mass* w) {
        const uint32_t b = bits_at(s);
        *c = class_count(hist, b);
        *w = *c != 0u ? mass(z_at(b)) : 0u;
      },
      mine, block_sum(mine, scratch), p, scratch);
  if (!split.ok) return false;  // (never: no token lies past the values)
  // The ids of the drawn value, and of the cut value where the cut splits its ties (else the
  // cut is its key and every tie): a value's ties share one key, so ranking ids ranks (key, id).
  __shared__ uint32_t cut_id_s, draw_id_s;
  const bool with_cut = uint32_t(split.j) < split.cut_count;
  if (threadIdx.x == 0) cut_id_s = uint32_t(INT_MAX);
  const uint32_t cut_b = bits_at(split.cut), draw_b = bits_at(split.draw);
  if (!gather_ranked(
          lg, vocab, split, with_cut,
          [draw_b](float x) { return __float_as_uint(x) >> 16 == draw_b; },
          [cut_b](float x) { return __float_as_uint(x) >> 16 == cut_b; },
          [](int i, float) { return uint32_t(i); }, reinterpret_cast<uint32_t*>(sm.cand), sm,
          &draw_id_s, &cut_id_s))
    return false;
  *out_thr = float_key(z_at(cut_b));
  *out_cut = int(cut_id_s);
  *drawn = int(draw_id_s);
  __syncthreads();
  return true;
}

// The value of an order key (core/top_p_weight.h order_key's inverse).
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? k & 0x7fffffffu : ~k);
}

// The first order key, from -inf's to +inf's, whose value x has a quantum q(x) =
// top_p_quantum(z_of(min(x, xmax)), zmax) below t (kTopPNoWeight is none), or one past +inf's
// key where no key has (zmax = z_of(xmax); a logit above xmax has q(xmax) = 0). q is
// non-increasing in the key, so the warp's 32 lanes test the last key of 32 equal parts of the
// range and the first part whose last key passes is searched next: 7 rounds over the ~2^32
// keys. Called by whole warps.
__device__ __forceinline__ uint32_t first_key_below(uint32_t t, const ZOf& z_of, float xmax,
                                                    float zmax) {
  const uint32_t lane = threadIdx.x & 31u;
  uint32_t lo = order_key(-INFINITY);
  uint64_t n = uint64_t(order_key(INFINITY)) + 1u - lo;  // the keys [lo, lo + n)
  while (n > 1u) {
    const uint64_t s = (n + 31u) / 32u, begin = lane * s, end = min((lane + 1u) * s, n);
    bool below = false;
    if (begin < n) {
      const float x = fminf(key_value(lo + uint32_t(end - 1u)), xmax);
      const uint32_t q = top_p_quantum(z_of(x), zmax);
      below = q != kTopPNoWeight && q < t;
    }
    const unsigned hits = __ballot_sync(0xffffffffu, below);
    if (hits == 0u) return lo + uint32_t(n);  // (the first round only: later a part's last passes)
    const uint64_t j = uint64_t(__ffs(hits) - 1);
    lo += uint32_t(j * s);
    n = min((j + 1u) * s, n) - j * s;
  }
  return lo;
}

// Top-p alone over fp32 logits, with draw stream 4's token, from counts of the weight's quanta
// (core/top_p_weight.h: a token's weight depends on its quantum q alone, and q is non-increasing in
// z, so the classes are q = 0 .. 65,535, u below 16): after the zmax pass, one pass counts every
// token's q (those past 65,535, and the NaN, weighed in registers), the classes' scan finds the
// quanta of the cut and the draw, and one pass gathers and ranks their tokens by (key, id). Returns
// false (nothing written the caller reads) where zmax is not finite, t has no exact reciprocal
// and the row is not one hoisted_quotient_fits takes, a quantum's count passes 16 bits, the cut
// lies past u = 16, or a split quantum has over kBinCand tokens.
template <class T>
__device__ __forceinline__ bool top_p_by_quanta(const T* lg, int vocab, const SampleParamsDev& p,
                                                float xmax, float zmax, Mass* scratch, BinSmem& sm,
                                                uint32_t* out_thr, int* out_cut, int* drawn) {
  const ZOf z_of(p.temperature);
  // (a t without an exact reciprocal: the hoisted division, in the rows where it gives the quanta)
  if (!isfinite(zmax) || (z_of.r == 0.0f && !hoisted_quotient_fits(z_of.t, xmax, zmax)))
    return false;
  uint32_t* hist = reinterpret_cast<uint32_t*>(&sm);  // [kClassWords], indexed by q
  const uint32_t* tables = sm.top_p_tables;
  // F by q & 4095 for the tokens past the classes: one load for two, and no product (~95% of a
  // sigma-4 row's tokens).
  uint32_t* f_of = hist + kClassWords;  // [kTopPFWords]
  zero_classes(hist);
  for (int i = threadIdx.x; i < kTopPFWords; i += blockDim.x)
    f_of[i] = top_p_weight_f(tables[i >> 6], tables[64 + (i & 63)]);
  __syncthreads();
  // The tokens past the classes: their weights (each below 2^24: F <= 2^31 shifted by 7 or more,
  // so a thread's ~vocab / 1024 sum below 2^40) and, from bit 40, their count, in one sum.
  constexpr int kTailCountBit = 40;
  Mass tail = 0u;
  // The quantum in its biased bits b (top_p_count_biased): q < kClasses is b < kTopPQuantumBias +
  // kClasses, and q's low 16 bits are b's. z_of's branch is taken once for the pass.
  auto count = [&](auto z) {
    auto tally = [&](int, float x) {
      const uint32_t b = top_p_count_biased(z(x), zmax);  // (u >= 40, NaN: weight 0)
      if (b < kTopPQuantumBias + uint32_t(kClasses)) {
        count_class(hist, b & 0xffffu);
      } else {  // (q >= kClasses: u >= 16)
        tail += top_p_tail_weight(f_of[b & 4095u], b) + (Mass(1) << kTailCountBit);
      }
    };
    for_each_logit<true>(  // (backward, between the forward zmax and gathering passes)
        lg, vocab, sm.ring,
        [&](int i, float x) {
          if (i < vocab) tally(i, x);
        },
        tally);
  };
  if (z_of.r != 0.0f)
    count([r = z_of.r](float x) { return x * r; });
  else
    count(QuotientOf(z_of.t));
  uint32_t n = uint32_t(tail >> kTailCountBit);  // tokens past the classes, then all counted
  tail &= (Mass(1) << kTailCountBit) - 1u;
  __syncthreads();
  // The thread's classes q = 64 t + j, j < 64, are its 32 words of counts; they share the coarse
  // table's entry and the shift, so a class costs a 32-bit F and a widening multiply-add
  // (top_p_class_mass; the scan was ~13 us of a row's ~115, H200, session 47). Lane l starts at
  // its word l, so that a warp's lanes read 32 banks.
  static_assert(kClassesPerThread == 64, "a thread's classes share q >> 6");
  const uint32_t* words = hist + kClassesPerThread / 2 * threadIdx.x;
  const Mass mine =
      top_p_class_mass(threadIdx.x, tables, tables + 64, [&](int i, uint32_t* w, uint32_t* j) {
        const uint32_t x = (uint32_t(i) + threadIdx.x) & 31u;
        *w = words[x];
        *j = 2u * x;
        n += (*w & 0xffffu) + (*w >> 16);
      });
  if (block_sum(n, scratch) != Mass(vocab)) return false;
  const Mass total = block_sum(mine + tail, scratch);
  const ClassSplit split = split_classes(
      [&](uint32_t q, uint32_t* c, Mass* w) {
        *c = class_count(hist, q);
        *w = top_p_weight_of(q, tables, tables + 64);
      },
      mine, total, p, scratch);
  if (!split.ok) return false;
  __shared__ unsigned long long cut_s, draw_s;
  // q(x) is non-increasing in x's order key (z_of, the subtraction from zmax and the products
  // are each monotone), so a quantum's logits are one interval of keys, and of values: warps 0-3
  // find the draw's and the cut's ends (first_key_below), and the gathering pass compares values,
  // not quanta (-0 and +0 share a quantum, a NaN none).
  __shared__ float ends_s[4];  // draw's first and last value, cut's first and last
  const int warp = int(threadIdx.x >> 5);
  if (warp < 4) {
    const uint32_t c = warp < 2 ? split.draw : split.cut;
    const bool past = warp & 1;  // the last key of the class, else its first
    const uint32_t k = first_key_below(past ? c : c + 1u, z_of, xmax, zmax);
    if ((threadIdx.x & 31) == 0) ends_s[warp] = key_value(past ? k - 1u : k);
  }
  __syncthreads();
  const float draw_lo = ends_s[0], draw_hi = ends_s[1], cut_lo = ends_s[2], cut_hi = ends_s[3];
  if (!gather_ranked(
          lg, vocab, split, true, [&](float x) { return x >= draw_lo && x <= draw_hi; },
          [&](float x) { return x >= cut_lo && x <= cut_hi; },
          [&](int i, float x) { return cand_of(float_key(z_of(x)), i); },
          reinterpret_cast<unsigned long long*>(&sm), sm, &draw_s, &cut_s))
    return false;
  cut_at(cut_s, out_thr, out_cut);
  *drawn = cand_id(draw_s);
  __syncthreads();
  return true;
}

}  // namespace loom::gpu
