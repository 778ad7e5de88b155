// Top-p's cut and draw stream 4's token (core/top_p_weight.h) in the sampling filter
// (kernels/sampling.cu's sample_filter_kernel), one block of kFilterThreads a row:
//   top_p_by_values — top-p alone over bf16 logits, from one count a bf16 value: a value's
//     tokens share one z, one key and one weight, so the counts give every mass, the cut and the
//     draw point's value, and one gathering pass the ids of the two values whose ties they split;
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

// top_p_by_values' histogram: 65,536 16-bit counts, two a word (value b in the low half of word
// b / 2 when b is even), over BinSmem's count, mass, incl and cand (none live while it is); then
// sm.cand's 8 bytes a candidate hold two lists of kBinCand 4-byte ids.
constexpr int kValueWords = 32768;
constexpr int kValuesPerThread = 2 * kValueWords / kFilterThreads;  // the scan's share: 64
static_assert(offsetof(BinSmem, ring) >= size_t(kValueWords) * 4, "the value counts fit");

// bf16 bits of the value at 16-bit key k (descending keys: descending values, +0 above -0).
__device__ __forceinline__ uint32_t value_at_key(uint32_t k) {
  return (k & 0x8000u) ? (k & 0x7fffu) : (~k & 0xffffu);
}

// Top-p alone over bf16 logits, with draw stream 4's token, from counts of the row's values (a
// pass), a scan of the counts (each thread 64 values, in order from the top) for the cut and
// the draw point, and a pass gathering the ids of the two values whose ties they split. The
// ties of one value are ordered by id, and the cut keeps the first j of the cut value's c
// (j = ceil(need / w)); the draw is the m-th id of its value (m = floor((point - above) / w)),
// found by ranking the gathered ids. Returns false (nothing written the caller reads; the
// caller runs mass_select) where a value's count passes 16 bits (the counted total falls short
// of vocab), a logit is not finite, two values share a z (z = x / t subnormal, or infinite), or
// either split value has more than kBinCand tokens.
__device__ __forceinline__ bool top_p_by_values(const __nv_bfloat16* lg, int vocab,
                                                const SampleParamsDev& p, Mass* scratch,
                                                BinSmem& sm, uint32_t* out_thr, int* out_cut,
                                                int* drawn) {
  __shared__ uint32_t top_key_s, cut_key_s, draw_key_s;
  __shared__ int first_s, j_s, m_s;
  __shared__ unsigned n_cut_s, n_draw_s;
  __shared__ uint32_t c_cut_s, c_draw_s;
  __shared__ Mass above_s, w_s;
  uint32_t* hist = reinterpret_cast<uint32_t*>(&sm);  // [kValueWords]
  const ZOf z_of(p.temperature);
  for (int j = threadIdx.x; j < kValueWords; j += blockDim.x) hist[j] = 0u;
  if (threadIdx.x == 0) top_key_s = 0u;
  __syncthreads();
  for_each_logit(lg, vocab, sm.ring, [&](int i, float x) {
    if (i >= vocab) return;
    const uint32_t b = __float_as_uint(x) >> 16;
    atomicAdd(&hist[b >> 1], (b & 1u) ? 0x10000u : 1u);
  });
  __syncthreads();
  const int t0 = int(threadIdx.x);
  auto key_of = [&](int e) { return uint32_t(0xffff - kValuesPerThread * t0 - e); };
  auto count_of = [&](uint32_t b) { return (hist[b >> 1] >> ((b & 1u) * 16u)) & 0xffffu; };
  auto z_at = [&](uint32_t b) { return z_of(__uint_as_float(b << 16)); };
  // The row's values: their count, the largest, and whether any breaks the order's assumptions.
  // A thread's 64 values are 32 consecutive words; lane l starts at its value l (so at word
  // l / 2), or a warp's lanes would read one bank at a time.
  const int lane = t0 & 31;
  uint32_t n = 0u, top = 0u;
  bool odd = false;
  for (int s = 0; s < kValuesPerThread; s++) {
    const int e = (s + lane) & (kValuesPerThread - 1);
    const uint32_t b = value_at_key(key_of(e)), c = count_of(b);
    if (c == 0u) continue;
    n += c;
    odd |= (b & 0x7fffu) >= 0x7f80u;  // infinite or NaN
    top = max(top, key_of(e));
  }
  if (top != 0u) atomicMax(&top_key_s, top);
  if (block_sum(n, scratch) != Mass(vocab) || __syncthreads_or(odd)) return false;
  const float zmax = z_at(value_at_key(top_key_s));
  const SelectWeight mass{true, zmax, sm.top_p_tables};
  auto w_at = [&](uint32_t b) { return mass(z_at(b)); };
  Mass mine = 0u;
  for (int s = 0; s < kValuesPerThread; s++) {
    const int e = (s + lane) & (kValuesPerThread - 1);
    const uint32_t b = value_at_key(key_of(e)), c = count_of(b);
    if (c == 0u) continue;
    const float z = z_at(b);
    odd |= isinf(z) || ((b & 0x7fffu) != 0u && fabsf(z) < FLT_MIN);  // two values, one z
    mine += c * mass(z);
  }
  if (__syncthreads_or(odd)) return false;
  // The first thread whose values' running mass reaches target, then in its warp (two of its
  // values a lane, a warp scan) the value that does: its key, count, weight and the mass above
  // it. limit: the cut (value, ties kept) caps the mass where the draw searches the kept prefix.
  // Returns the thread's inclusive running mass.
  auto find = [&](Mass thread_mass, Mass target, uint32_t limit_key, uint32_t limit_count,
                  uint32_t* key_out, uint32_t* count_out) {
    Mass total;
    const Mass incl = block_scan(thread_mass, scratch, &total);
    if (threadIdx.x == 0) first_s = kFilterThreads;
    __syncthreads();
    if (incl >= target) atomicMin(&first_s, t0);
    __syncthreads();
    const int f = first_s;  // (< kFilterThreads: the total reaches every target)
    if ((t0 >> 5) == (f >> 5)) {
      const Mass excl = __shfl_sync(0xffffffffu, incl - thread_mass, f & 31);
      const uint32_t k0 = uint32_t(0xffff - kValuesPerThread * f - 2 * lane);  // values 2l, 2l + 1
      Mass m[2], w[2];
      for (int q = 0; q < 2; q++) {
        const uint32_t b = value_at_key(k0 - q);
        const uint32_t c = k0 - q == limit_key ? limit_count : count_of(b);
        w[q] = c != 0u ? w_at(b) : 0u;
        m[q] = c * w[q];
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
        *key_out = k0 - q, *count_out = count_of(value_at_key(k0 - q));
        above_s = q == 0 ? before : before + m[0], w_s = w[q];
      }
    }
    __syncthreads();
    return incl;
  };
  const Mass total = block_sum(mine, scratch);
  const Mass target = mass_target(p.top_p, total);
  const Mass incl = find(mine, target, 0x10000u, 0u, &cut_key_s, &c_cut_s);
  const uint32_t cut_key = cut_key_s;
  const Mass cut_above = above_s, cut_w = w_s;
  const int j = int((target - cut_above + cut_w - 1) / cut_w);  // the cut value's ties kept
  const Mass kept = cut_above + Mass(j) * cut_w;
  const int f = first_s;  // the kept prefix's mass a thread: all of it above f, none below
  const Mass mine_kept = t0 < f ? mine : t0 == f ? kept - (incl - mine) : 0u;
  const Mass point = top_p_draw_point(p.seed, p.sample_index, p.draw_index, kept);
  find(mine_kept, point + 1u, cut_key, uint32_t(j), &draw_key_s, &c_draw_s);
  const uint32_t draw_key = draw_key_s, c_cut = c_cut_s, c_draw = c_draw_s;
  const int m = int((point - above_s) / w_s);  // the drawn value's m-th id (from 0)
  const bool split = uint32_t(j) < c_cut;      // ids of the cut value needed
  if (c_draw > uint32_t(kBinCand) || (split && c_cut > uint32_t(kBinCand))) return false;
  // Gather the ids of the drawn value (and of the cut value where the cut splits its ties).
  uint32_t* draw_ids = reinterpret_cast<uint32_t*>(sm.cand);  // [c_draw]
  uint32_t* cut_ids = draw_ids + kBinCand;                    // [c_cut] where split
  const uint32_t draw_b = value_at_key(draw_key), cut_b = value_at_key(cut_key);
  if (threadIdx.x == 0) n_draw_s = 0u, n_cut_s = 0u, j_s = INT_MAX, m_s = -1;
  __syncthreads();
  for_each_logit(lg, vocab, sm.ring, [&](int i, float x) {
    if (i >= vocab) return;
    const uint32_t b = __float_as_uint(x) >> 16;
    if (b == draw_b) draw_ids[atomicAdd(&n_draw_s, 1u)] = uint32_t(i);
    if (split && b == cut_b) cut_ids[atomicAdd(&n_cut_s, 1u)] = uint32_t(i);
  });
  __syncthreads();
  // The id with exactly `rank` smaller ids among ids[0, n).
  auto ranked = [&](const uint32_t* ids, int count, int rank, int* out) {
    for (int e = threadIdx.x; e < count; e += blockDim.x) {
      int below = 0;
      for (int g = 0; g < count; g++) below += ids[g] < ids[e];
      if (below == rank) *out = int(ids[e]);
    }
  };
  ranked(draw_ids, int(c_draw), m, &m_s);
  if (split) ranked(cut_ids, int(c_cut), j - 1, &j_s);
  __syncthreads();
  *out_thr = float_key(z_at(cut_b));
  *out_cut = j_s;
  *drawn = m_s;
  __syncthreads();
  return true;
}

}  // namespace loom::gpu
