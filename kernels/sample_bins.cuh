// The sampling filter's building blocks (kernels/sample_select.cuh's selects): the order key
// and logit loads the draw shares too (float_key, logit_at, word_logit, in_filter), the exact
// integer weights and their block sums (counts, or top-p's fixed-point masses), the row stream
// through shared memory (for_each_logit), the shared-memory layout (BinSmem) and the digit
// histograms in lane slots with their fold. Device code, included by sample_select.cuh only.
#pragma once

#include <cuda_bf16.h>

#include "core/top_p_weight.h"
#include "kernels/common.cuh"
#include "kernels/sampling.cuh"

namespace loom::gpu {
constexpr int kFilterThreads = 1024;

// Monotone map of a float to uint32: a < b  ⇔  key(a) < key(b) (core/top_p_weight.h).
__device__ __forceinline__ uint32_t float_key(float f) {
  return order_key(f);
}

// Logits come as fp32, or as the bf16 the lm_head GEMM writes (widened exactly on load).
__device__ __forceinline__ float logit_at(const float* lg, int i) {
  return __ldg(lg + i);
}
__device__ __forceinline__ float logit_at(const __nv_bfloat16* lg, int i) {
  return __bfloat162float(lg[i]);
}

// Logit j of words w as a vector load left them (an fp32 logit a word, or two bf16 logits a
// word, the lower id in the low half), widened exactly.
template <class T>
__device__ __forceinline__ float word_logit(const uint32_t* w, int j) {
  if constexpr (sizeof(T) == 4)
    return __uint_as_float(w[j]);
  else
    return __uint_as_float(j % 2 ? w[j / 2] & 0xffff0000u : w[j / 2] << 16);
}

// z = x / t as the IEEE division gives it (the CPU's z). Where t is a power of two whose
// reciprocal is normal (T = 1, the default, and every benchmark mode), x · (1/t) is the same
// number (the exact quotient, rounded once) for one multiply instead of the division's ~10
// instructions with a slow path; t is the same for the whole row, so the branch is uniform.
struct ZOf {
  float t, r;  // r = 1/t where exact, else 0
  __device__ explicit ZOf(float temperature) : t(temperature), r(0.0f) {
    int e;
    const float m = frexpf(t, &e);  // t = m 2^e, m in [0.5, 1)
    if (m == 0.5f && e >= -124 && e <= 127) r = ldexpf(1.0f, 1 - e);
  }
  __device__ __forceinline__ float operator()(float x) const {
    if (r != 0.0f) return x * r;
    return x / t;
  }
};

// x / t by the IEEE division's own fast path with its reciprocal hoisted, for a row whose t
// has no exact one: y = rcp(t) and one Newton step once (MUFU.RCP and two FMAs, as nvcc's x / t
// computes them for every x), then q = x y, r = x - t q, z = q + r y: three FMAs a logit instead
// of ~10 with FCHK's branch to the slow path. The same number as x / t wherever that branch is
// not taken; tests/cuda/test_sampling_noise.cu checks every x with |x| in [2^-100, 2^100] for
// t across [2^-20, 2^20] (hoisted_quotient_fits says where a top-p row may take it).
struct QuotientOf {
  float t, y;
  __device__ explicit QuotientOf(float temperature) : t(temperature) {
    float y0;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y0) : "f"(t));
    y = __fmaf_rn(y0, __fmaf_rn(-t, y0, 1.0f), y0);
  }
  __device__ __forceinline__ float operator()(float x) const {
    const float q = __fmul_rn(x, y);
    return __fmaf_rn(y, __fmaf_rn(-t, q, x), q);
  }
};

// Whether every logit x <= xmax of a row has the top-p quantum (core/top_p_weight.h) of
// QuotientOf(t)(x) that it has of x / t, zmax = xmax / t. Where |x| is in [2^-100, 2^100] the two
// quotients are one number. Else x is a zero (both give a zero), below 2^-100 in magnitude
// (|z| < 2^-80, a quarter of zmax's unit or less: zmax - z rounds to zmax either way), below
// -2^100 (z at least 2^79 under zmax, u past 40 either way, NaN included), or a NaN.
__device__ __forceinline__ bool hoisted_quotient_fits(float t, float xmax, float zmax) {
  return t >= 0x1p-20f && t <= 0x1p20f && fabsf(xmax) <= 0x1p99f && fabsf(zmax) >= 0x1p-40f;
}

__device__ __forceinline__ bool in_filter(uint32_t key, int i, uint32_t thr, int id_cut) {
  return key > thr || (key == thr && i <= id_cut);
}

// A select's weights and their sums: counts, or top-p's fixed-point masses (core/top_p_weight.h),
// integers either way, so every sum is exact in any order.
using Mass = unsigned long long;

__device__ __forceinline__ Mass warp_sum(Mass v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ Mass block_sum(Mass v, Mass* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_sum(lane < int(blockDim.x >> 5) ? scratch[lane] : 0u);
}

// Inclusive prefix sum over the block (thread order); scratch holds 32 words.
__device__ Mass block_scan(Mass v, Mass* scratch, Mass* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  Mass x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const Mass y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = x;
  __syncthreads();
  // The warps' totals scanned by every warp at once (lane w holds warp w's), not a loop over them.
  const Mass mine = lane < int(blockDim.x >> 5) ? scratch[lane] : 0u;
  Mass y = mine;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const Mass z = __shfl_up_sync(0xffffffffu, y, o);
    if (lane >= o) y += z;
  }
  *total = __shfl_sync(0xffffffffu, y, 31);
  return __shfl_sync(0xffffffffu, y - mine, warp) + x;
}

// core/top_p_weight.h's tables, copied by the filter into BinSmem::top_p_tables (a warp's lanes
// index them apart, which constant memory would serialise).
__constant__ uint32_t kTopPTablesDev[128] = {LOOM_TOP_P_COARSE, LOOM_TOP_P_FINE};

// Weight of element i in a select: 1 (count) or top-p's fixed-point mass relative to zmax
// (tables: BinSmem::top_p_tables).
struct SelectWeight {
  bool mass;
  float zmax;
  const uint32_t* tables;
  __device__ Mass operator()(float z) const {
    return mass ? top_p_weight_of(top_p_quantum(z, zmax), tables, tables + 64) : 1u;
  }
};

// The least total weight top-p's kept prefix reaches (at least its first element's).
__device__ __forceinline__ Mass mass_target(float top_p, Mass total) {
  return max(Mass(top_p_target(top_p, total)), Mass(1));
}

// A mass select's target from the total weight m > 0 of the elements it selects among: top-p's
// cut (mass_target), or draw stream 4's token, the first element whose cumulative weight exceeds
// the draw point (core/top_p_weight.h), i.e. reaches the point + 1.
struct MassTarget {
  float top_p = 1.0f;
  bool draw = false;
  uint64_t seed = 0, draw_index = 0;
  uint32_t sample_index = 0;
  __device__ static MassTarget of_draw(const SampleParamsDev& p) {
    return MassTarget{1.0f, true, p.seed, p.draw_index, p.sample_index};
  }
  __device__ Mass operator()(Mass m) const {
    return draw ? Mass(top_p_draw_point(seed, sample_index, draw_index, m)) + 1u
                : mass_target(top_p, m);
  }
};

constexpr int kRing = 4;  // 16-byte chunks a filter thread's ring holds

// f(i, x) for every logit x = logits[i] of the row, in no particular order, or inside(i, x)
// where the chunk lies inside the row (i < vocab: no id check needed; the one-functor form passes
// f for both). The row streams through shared memory by cp.async: thread t copies 16-byte chunks
// t, t + blockDim.x, ... of it into its own kRing slots of `ring` and reads back only those, so
// the copies need no barrier and kRing - 1 of them stay in flight a thread without holding
// registers (register loads, four a thread at 64 registers, left every pass waiting on memory
// latency: ~100 us a row for a pass, 256 rows in two waves; more slots where a pass has the
// shared memory bought nothing, session 46). Chunks are counted from the 16-byte boundary at or
// below the row's start (an odd vocabulary's rows start anywhere; the bytes before a row's start
// are the row before's, or the aligned start of the buffer), and the last chunk reads only up to
// the row's end. Ids outside the row, and a last round's missing chunks, pass i = vocab. The trip
// count is the block's, so f may hold a warp collective.
// The rounds whose chunks are all whole and inside the row (all but the first where the row
// starts inside a chunk, and the last one or two) are told apart by the round alone: their copy
// is the plain 16-byte form at a running address and their ids go unchecked. Addresses by a
// generic pointer, a copy size and a warp vote a round had cost ~49 instructions a round, a
// third of an fp32 top-p filter's instructions (ncu, H200, session 46).
// kBackward streams the rounds from the row's end, so that a pass after a forward one starts
// on the bytes that pass read last (a wave of 132 one-row blocks streams 132 MB of fp32 rows
// through the 50 MB L2; a second forward pass starts on evicted bytes). It buys less than that
// predicts (L2 turns over in ~12 us at full HBM rate): fp32 top-p 257.5 -> 250.6 us at 256 rows
// with its count pass backward, 2 us slower at one row (H200, session 48).
template <bool kBackward = false, class T, class F, class G>
__device__ __forceinline__ void for_each_logit(const T* logits, int vocab, uint4* ring, F&& f,
                                               G&& inside) {
  constexpr int kPer = 16 / int(sizeof(T));  // logits a chunk
  constexpr int nt = kFilterThreads;         // the filter kernel's block (its launch bounds)
  constexpr uint32_t kRoundBytes = 16u * nt;
  const int lead = int(reinterpret_cast<uintptr_t>(logits) % 16) / int(sizeof(T));
  const int chunks = (lead + vocab + kPer - 1) / kPer;
  const int rounds = (chunks + nt - 1) / nt;
  // Chunks below `whole` hold kPer logits of the buffer; those from chunk 1 (0 where the row is
  // aligned) lie inside the row too. Rounds below whole_rounds copy only such chunks.
  const int whole = (lead + vocab) / kPer, whole_rounds = whole / nt, first = lead > 0 ? 1 : 0;
  const uint32_t slot0 = smem_u32(ring) + 16u * threadIdx.x;
  // This thread's chunk of round 0 (chunk c = r nt + t of round r is kRoundBytes r further on).
  const char* src = reinterpret_cast<const char*>(logits - lead) + 16 * size_t(threadIdx.x);
  auto round_at = [&](int k) { return kBackward ? rounds - 1 - k : k; };  // the k-th streamed
  auto issue = [&](int k) {  // the k-th streamed round's chunk of this thread into slot k % kRing
    const uint32_t dst = slot0 + uint32_t(k % kRing) * kRoundBytes;
    const int r = round_at(k);
    if (kBackward && r < 0) {  // (past the row's start: an empty group)
      cp_async_commit();
      return;
    }
    const char* from = src + size_t(r) * kRoundBytes;
    if (r < whole_rounds) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(from) : "memory");
    } else {
      const int c = r * nt + int(threadIdx.x);
      if (r < rounds && c < chunks)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(from),
                     "r"(min(kPer, lead + vocab - c * kPer) * int(sizeof(T)))
                     : "memory");
    }
    cp_async_commit();  // one group a round, empty or not: wait_group counts rounds
  };
#pragma unroll
  for (int r = 0; r < kRing - 1; r++) issue(r);
#pragma unroll 1
  for (int k = 0; k < rounds; k++) {
    issue(k + kRing - 1);  // into the slot round k - 1 read (its values are used by now)
    cp_async_wait<kRing - 1>();
    const int r = round_at(k), c = r * nt + int(threadIdx.x), i0 = c * kPer - lead;
    uint32_t w[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "r"(slot0 + uint32_t(k % kRing) * kRoundBytes)
                 : "memory");
    // Every chunk of a whole round lies inside the row; elsewhere a warp whose chunks all do
    // passes ids unchecked too. f sees the same ids either way, and its collectives the whole
    // warp on one side.
    if ((r >= first && r < whole_rounds) ||
        __all_sync(0xffffffffu, c < chunks && i0 >= 0 && i0 + kPer <= vocab)) {
#pragma unroll
      for (int j = 0; j < kPer; j++) inside(i0 + j, word_logit<T>(w, j));
    } else {
#pragma unroll
      for (int j = 0; j < kPer; j++) {
        const int i = i0 + j;
        f(c < chunks && i >= 0 && i < vocab ? i : vocab, word_logit<T>(w, j));
      }
    }
  }
}
template <bool kBackward = false, class T, class F>
__device__ __forceinline__ void for_each_logit(const T* logits, int vocab, uint4* ring, F&& f) {
  for_each_logit<kBackward>(logits, vocab, ring, f, f);
}

// mass[slot] += w as two 32-bit words (shared-memory atomics on 64-bit words are compare-and-swap
// loops; 32-bit adds are native): the low word's wraps carry into the high word, exactly.
__device__ __forceinline__ void add_mass(uint32_t* lo, uint32_t* hi, int slot, Mass w) {
  const uint32_t wl = uint32_t(w), old = atomicAdd(&lo[slot], wl);
  const uint32_t wh = uint32_t(w >> 32) + (old + wl < old ? 1u : 0u);
  if (wh != 0u) atomicAdd(&hi[slot], wh);
}
__device__ __forceinline__ Mass mass_of(const uint32_t* lo, const uint32_t* hi, int slot) {
  return (Mass(hi[slot]) << 32) + lo[slot];
}

constexpr int kBins = 4096, kBinCand = 4096;
constexpr int kBinsPerThread = kBins / kFilterThreads;  // the boundary search's share
constexpr int kLaneBins = 256;                          // bins of an 8-bit digit
struct BinSmem {  // dynamic shared memory of sample_filter_kernel
  uint32_t count[kBins];
  Mass mass[kBins];
  Mass incl[kFilterThreads];  // inclusive prefix sums, thread order
  union {
    unsigned long long cand[kBinCand];  // (~key << 32) | id: ascending = (key desc, id asc)
    struct {  // a digit's histogram: bins x 2^spread slots (kLaneBins x 32 at spread 5)
      uint32_t count[kLaneBins * 32];
      uint32_t mass_lo[kLaneBins * 32], mass_hi[kLaneBins * 32];  // (add_mass)
    } lanes;
  };
  uint4 ring[kRing * kFilterThreads];  // for_each_logit's chunks, kRing slots a thread
  uint32_t top_p_tables[128];          // kTopPTablesDev
};

__device__ void zero_lanes(BinSmem& sm) {
  for (int j = threadIdx.x; j < kLaneBins * 32; j += blockDim.x)
    sm.lanes.count[j] = sm.lanes.mass_lo[j] = sm.lanes.mass_hi[j] = 0u;
}

// One digit's histogram over the elements with in_filter(key, i, thr0, cut0) and a digit
// d = digit(key, z) >= 0, in sm.lanes: count[slot] += 1 and, for a mass select, the weight to
// slot's (mass_lo, mass_hi) words, slot = (d << spread) + lane % 2^spread. With spread 5 each lane
// has its own slot of a bin, with 4 two lanes share one (fold_lanes sums them): the top digits of
// real logits fall into a few bins, and a warp's lanes adding to one shared address serialise. The
// digit's bin `skip` (a catch-all that would take most of a wide row's elements) stays out of
// shared memory: the thread counts and weighs its elements itself. Returns the thread's sums.
struct DigitSums {
  Mass mass = 0u;       // weights of every element with a digit (0 for counts)
  Mass skip_mass = 0u;  // of those in bin `skip`
  uint32_t skip_count = 0u;
};
template <class T, class Digit>
__device__ DigitSums digit_histogram(const T* logits, int vocab, float temperature,
                                     SelectWeight wfn, uint32_t thr0, int cut0, Digit digit,
                                     int skip, int spread, BinSmem& sm) {
  const int lane = int(threadIdx.x & ((1u << spread) - 1u));
  const ZOf z_of(temperature);
  DigitSums s;
  for_each_logit(logits, vocab, sm.ring, [&](int i, float x) {
    if (i >= vocab) return;
    const float z = z_of(x);
    const uint32_t key = float_key(z);
    const int d = in_filter(key, i, thr0, cut0) ? digit(key, z) : -1;
    if (d < 0) return;
    const Mass w = wfn.mass ? wfn(z) : 0u;
    s.mass += w;
    if (d == skip) {
      s.skip_count++;
      s.skip_mass += w;
      return;
    }
    const int slot = (d << spread) + lane;
    atomicAdd(&sm.lanes.count[slot], 1u);
    if (wfn.mass) add_mass(sm.lanes.mass_lo, sm.lanes.mass_hi, slot, w);
  });
  return s;
}

// The key's digit (key >> shift) & bin_mask where its bits under high_mask equal prefix, else -1.
struct KeyDigit {
  uint32_t high_mask, prefix, bin_mask;
  int shift;
  __device__ int operator()(uint32_t key, float) const {
    return (key & high_mask) == prefix ? int((key >> shift) & bin_mask) : -1;
  }
};

// Top-p's first digit: kZBins bins 1/32 of a unit of z wide from zmax down (kZBins - 1 -
// floor(32 (zmax - z)), the 16 units below zmax; everything lower in bin 0, a NaN z in the top
// bin). It is non-decreasing in z, so bins are ranges of keys, as the key's own digits are; but
// a row's logits spread over hundreds of bins (the key's top 8 bits put most of a sigma-1 row
// into 2-4 bins, every warp's lane l then adding to the same slot), and a boundary bin holds
// ~3,000 logits or fewer, so the cut is gathered after one pass. 16 units: top-p 0.9's cut lies
// ~5 units below zmax at sigma 1, ~8 (up to ~10 in some rows) at sigma 2-4; an 8-unit window
// sent those rows to bin 0 and the full bin_select. Bin 0 is digit_histogram's skipped bin: a
// wide row (sigma 4: ~70% of it more than 16 units below zmax) would otherwise have every
// warp's lanes contend for its slots.
constexpr int kZBins = 512, kZSpread = 4;  // 512 bins x 16 lane slots: the lanes' 8,192 slots
struct ZDigit {
  float zmax;
  __device__ int operator()(uint32_t, float z) const {
    return z != z ? kZBins - 1 : kZBins - 1 - int(fminf((zmax - z) * 32.0f, float(kZBins - 1)));
  }
};

// Bin b's weight after fold_lanes: its mass for a mass select, else its count.
__device__ __forceinline__ Mass bin_weight(const BinSmem& sm, SelectWeight wfn, int b) {
  return wfn.mass ? sm.mass[b] : Mass(sm.count[b]);
}

// sm.count[b], sm.mass[b] for b < bins: the sums of bin b's 2^spread lane slots (bins <<
// spread <= kLaneBins * 32), in lane order from a rotated start (bin b starts at slot b %
// 2^spread: no bank conflicts); integers, so the order does not change the sums.
__device__ void fold_lanes(BinSmem& sm, int bins, int spread) {
  const int lanes = 1 << spread;
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    uint32_t c = 0u;
    Mass m = 0u;
    for (int j = 0; j < lanes; j++) {
      const int slot = b * lanes + ((b + j) & (lanes - 1));
      c += sm.lanes.count[slot];
      m += mass_of(sm.lanes.mass_lo, sm.lanes.mass_hi, slot);
    }
    sm.count[b] = c;
    sm.mass[b] = m;
  }
}

}  // namespace loom::gpu
