// The sampling filter's selects (kernels/sampling.cu's sample_filter_kernel): the cut of a row's
// top-k / top-p set as a key threshold and an id cut among ties at it, found by one block of
// kFilterThreads a row. The sampled top-k (one gathering pass), the digit histograms refined
// until the boundary bin is small (bin_select) and the radix select with an ordered tie scan
// (radix_select, the fallback), over the building blocks of kernels/sample_bins.cuh. Device
// code, included by sampling.cu only.
#pragma once

#include <climits>

#include "kernels/sample_bins.cuh"

namespace loom::gpu {

// Over the elements with in_filter(key, i, thr0, cut0), finds the largest key v with
// W(key >= v) >= target and the id cut among ties at v at which the prefix (order: key desc,
// id asc) first reaches target. z = logit / temperature, as the CPU computes it.
template <class T>
__device__ void radix_select(const T* logits, int vocab, float temperature, SelectWeight wfn,
                             uint32_t thr0, int cut0, Mass target, uint32_t* out_thr, int* out_cut,
                             Mass* scratch, BinSmem& sm) {
  __shared__ uint32_t prefix_s;
  __shared__ Mass above_s, tie_w_s;
  __shared__ int cut_s;
  const ZOf z_of(temperature);
  uint32_t prefix = 0;
  Mass above = 0u;
  for (int shift = 24; shift >= 0; shift -= 8) {
    zero_lanes(sm);
    __syncthreads();
    const uint32_t high_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    digit_histogram(logits, vocab, temperature, wfn, thr0, cut0,
                    KeyDigit{high_mask, prefix & high_mask, 255u, shift}, -1, 5, sm);
    __syncthreads();
    fold_lanes(sm, kLaneBins, 5);
    __syncthreads();
    if (threadIdx.x == 0) {
      Mass cum = above;
      int chosen = 0;
      for (int b = kLaneBins - 1; b >= 0; b--) {
        if (cum + bin_weight(sm, wfn, b) >= target) {
          chosen = b;
          break;
        }
        cum += bin_weight(sm, wfn, b);
      }
      prefix_s = prefix | (uint32_t(chosen) << shift);
      above_s = cum;
      tie_w_s = bin_weight(sm, wfn, chosen);
    }
    __syncthreads();
    prefix = prefix_s;
    above = above_s;
  }
  const uint32_t v = prefix;
  int cut = INT_MAX;
  // Ties at v: with one tie, or a count select whose ties all fit, every tie is kept.
  const bool scan = wfn.mass || above + tie_w_s > target;
  if (scan) {
    if (threadIdx.x == 0) cut_s = INT_MAX;
    __syncthreads();
    Mass cum = above;
    for (int base = 0; base < vocab; base += blockDim.x) {
      const int i = base + threadIdx.x;
      Mass w = 0u;
      bool tie = false;
      if (i < vocab) {
        const float z = z_of(logit_at(logits, i));
        const uint32_t key = float_key(z);
        if (key == v && in_filter(key, i, thr0, cut0)) {
          tie = true;
          w = wfn(z);
        }
      }
      Mass total;
      const Mass inc = block_scan(w, scratch, &total);
      // The first tie (in id order) at which the running weight reaches the target.
      if (tie && cum + inc >= target) atomicMin(&cut_s, i);
      __syncthreads();
      const int c = cut_s;
      __syncthreads();
      if (c != INT_MAX) break;
      cum += total;
    }
    cut = cut_s;
  }
  *out_thr = v;
  *out_cut = cut;
}

__device__ __forceinline__ float key_float(uint32_t key) {  // float_key's inverse
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// Thread t holds w (the weight of its bins, or candidates, in order); returns the first thread
// whose inclusive sum reaches target (kFilterThreads if none) and its exclusive sum.
__device__ int first_reaching(Mass w, Mass target, Mass* scratch, BinSmem& sm, Mass* before) {
  __shared__ int first_s;
  Mass total;
  const Mass inc = block_scan(w, scratch, &total);
  sm.incl[threadIdx.x] = inc;
  if (threadIdx.x == 0) first_s = kFilterThreads;
  __syncthreads();
  if (inc >= target) atomicMin(&first_s, int(threadIdx.x));
  __syncthreads();
  const int f = first_s;
  *before = f > 0 && f < kFilterThreads ? sm.incl[f - 1] : 0u;
  __syncthreads();
  return f;
}

// The bin (of kBins, from the top) at which the weight summed from the top first reaches target,
// and *above, the weight of the bins above it; -1 when the total stays short of target.
template <class W>
__device__ int boundary_bin(W weight, Mass target, Mass* scratch, BinSmem& sm, Mass* above) {
  const int top = kBins - 1 - kBinsPerThread * int(threadIdx.x);  // kBinsPerThread a thread
  Mass w = 0u;
  for (int b = top; b > top - kBinsPerThread; b--) w += weight(b);
  const int f = first_reaching(w, target, scratch, sm, above);
  if (f == kFilterThreads) return -1;
  int bin = kBins - 1 - kBinsPerThread * f;
  for (int k = 1; k < kBinsPerThread && *above + weight(bin) < target; k++) *above += weight(bin--);
  return bin;
}

// Sorts sm.cand[0, n) ascending (key desc, id asc) by a bitonic sort over the next power of two,
// thread t comparing the pairs (i, i ^ j) of i = t, t + blockDim.x, ...
__device__ void sort_cand(BinSmem& sm, int n) {
  int n_pad = 1;
  while (n_pad < n) n_pad <<= 1;
  for (int j = n + int(threadIdx.x); j < n_pad; j += blockDim.x) sm.cand[j] = ~0ull;
  __syncthreads();
  for (int k = 2; k <= n_pad; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n_pad; i += blockDim.x) {
        const int ij = i ^ j;
        if (ij > i) {
          const unsigned long long a = sm.cand[i], c = sm.cand[ij];
          if ((a > c) == ((i & k) == 0)) sm.cand[i] = c, sm.cand[ij] = a;
        }
      }
      // A stage of stride j < 32 pairs elements of one warp (i and i ^ j share i / 32), and so
      // does the next one of the same k: a warp barrier suffices between them.
      if (j > 1 && j < 32)
        __syncwarp();
      else
        __syncthreads();
    }
}

// A candidate (key, id) as one sortable word: ascending = (key desc, id asc); and back.
__device__ __forceinline__ unsigned long long cand_of(uint32_t key, int i) {
  return (static_cast<unsigned long long>(~key) << 32) | uint32_t(i);
}
__device__ __forceinline__ uint32_t cand_key(unsigned long long c) {
  return ~uint32_t(c >> 32);
}
__device__ __forceinline__ int cand_id(unsigned long long c) {
  return int(uint32_t(c));
}
__device__ __forceinline__ void cut_at(unsigned long long c, uint32_t* out_thr, int* out_cut) {
  *out_thr = cand_key(c);
  *out_cut = cand_id(c);
}

// The largest key v among the candidates sm.cand[0, n) at which their weight summed from the
// top (key descending) reaches need (>= 1; their total does), and the weight still needed from
// the ties at v (*tie_need, >= 1). An 8-bit radix select over the candidates' keys: a round adds
// the weights of the candidates under the prefix into 256 shared bins (counts, or top-p masses
// as add_mass's two words in sm.mass) and one warp finds the digit (lane l sums the 8 bins
// 255 - 8 l down, a scan over the lanes, the first lane reaching the need walks its 8). Uses
// sm.count and sm.mass (free once the bins that chose the candidates are read). kMass: the
// weights are wfn's masses (wfn.mass is true), else counts (the loop carries no mass code).
template <bool kMass>
__device__ uint32_t select_key(BinSmem& sm, int n, Mass need, SelectWeight wfn, Mass* tie_need) {
  __shared__ uint32_t prefix_s;
  __shared__ Mass need_s;
  if (threadIdx.x == 0) prefix_s = 0u, need_s = need;
  uint32_t* lo = reinterpret_cast<uint32_t*>(sm.mass);  // [256] low words, then [256] high
  uint32_t* hi = lo + 256;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
      if (kMass)
        lo[b] = hi[b] = 0u;
      else
        sm.count[b] = 0u;
    }
    __syncthreads();
    const uint32_t prefix = prefix_s, high = shift == 24 ? 0u : 0xffffffffu << (shift + 8);
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
      const uint32_t key = cand_key(sm.cand[e]);
      if ((key & high) != prefix) continue;
      const int d = int((key >> shift) & 255u);
      if (kMass)
        add_mass(lo, hi, d, wfn(key_float(key)));
      else
        atomicAdd(&sm.count[d], 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // the digit d at which the weight from the top reaches the need
      const int lane = int(threadIdx.x);
      const Mass want = need_s;
      Mass w[8], mine = 0u;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const int b = 255 - 8 * lane - j;
        w[j] = kMass ? mass_of(lo, hi, b) : Mass(sm.count[b]);
        mine += w[j];
      }
      Mass incl = mine;  // weight in lanes 0 .. lane's bins (from the top)
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const Mass y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      const unsigned hit = __ballot_sync(0xffffffffu, incl >= want);  // (the total reaches it)
      if (lane == __ffs(hit) - 1) {
        Mass above = incl - mine;
        for (int j = 0; j < 8; j++) {
          if (above + w[j] >= want) {
            prefix_s = prefix | (uint32_t(255 - 8 * lane - j) << shift);
            need_s = want - above;
            break;
          }
          above += w[j];
        }
      }
    }
    __syncthreads();
  }
  *tie_need = need_s;
  return prefix_s;
}

// The candidates sm.cand[0, n) whose key passes keep(key), compacted to sm.cand[0, m) in no
// particular order (through sm.mass); returns m.
template <class Keep>
__device__ int compact_cand(BinSmem& sm, int n, Keep keep) {
  __shared__ int m_s;
  if (threadIdx.x == 0) m_s = 0;
  __syncthreads();
  auto* kept = reinterpret_cast<unsigned long long*>(sm.mass);  // [m] (kBins >= kBinCand words)
  static_assert(kBins >= kBinCand, "sm.mass holds the candidates");
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    const unsigned long long c = sm.cand[e];
    if (keep(cand_key(c))) kept[atomicAdd(&m_s, 1)] = c;
  }
  __syncthreads();
  const int m = m_s;
  for (int e = threadIdx.x; e < m; e += blockDim.x) sm.cand[e] = kept[e];
  __syncthreads();
  return m;
}

// The candidates sm.cand[0, n) cut down to those at or above the k-th largest key (every tie at
// it kept), compacted to sm.cand[0, m); returns m (>= k). The sort then runs over the next
// power of two of m (~k) instead of n's (the sampled threshold passes about twice k): at k =
// 1,000, 1,024 elements instead of 4,096; at k = 50, 64 instead of 1,024.
__device__ int keep_top_k(BinSmem& sm, int n, int k) {
  Mass unused;
  const uint32_t v = select_key<false>(sm, n, Mass(k), SelectWeight{false, 0.0f, nullptr}, &unused);
  return compact_cand(sm, n, [&](uint32_t key) { return key >= v; });
}

// The cut among the candidates sm.cand[0, n) (in no order) at which their weight summed in order
// (key desc, id asc) first reaches need: the key v by select_key, then among the ties at v (one
// weight w each: it depends on the key alone) the ceil(tie_need / w)-th smallest id, by sorting
// the ties only (usually a handful; bf16 logits share keys by the hundred). No sort of the bin.
// *kept: the candidates' weight down to the cut (need or a little more).
__device__ void cut_of_candidates(BinSmem& sm, int n, Mass need, SelectWeight wfn,
                                  uint32_t* out_thr, int* out_cut, Mass* kept) {
  Mass tie_need;
  const uint32_t v = wfn.mass ? select_key<true>(sm, n, need, wfn, &tie_need)
                              : select_key<false>(sm, n, need, wfn, &tie_need);
  const Mass w = wfn(key_float(v));  // > 0: the ties at v add the tie_need >= 1
  const int m = compact_cand(sm, n, [&](uint32_t key) { return key == v; });
  sort_cand(sm, m);
  const int c = min(m, int((tie_need + w - 1) / w));  // the ties kept
  cut_at(sm.cand[c - 1], out_thr, out_cut);
  *kept = need - tie_need + Mass(c) * w;
  __syncthreads();
}

// Top-k in one pass over the row, for k <= kSampledTopK: the keys of kSampleKeys logits spread
// over the row give a threshold that k and a margin pass (their top 12 bits' histogram),
// the pass gathers every logit at or above it, and the k-th of those sorted is the cut. Leaves
// sm.cand[0, k) sorted (key desc, id asc). Returns false (the caller runs bin_select) when
// fewer than k or more than kBinCand logits pass.
constexpr int kSampleKeys = 4 * kFilterThreads, kSampledTopK = kSampleList;
template <class T>
__device__ bool sampled_top_k(const T* logits, int vocab, float temperature, int k,
                              uint32_t* out_thr, int* out_cut, Mass* scratch, BinSmem& sm) {
  __shared__ unsigned n_cand_s, n_bin_s;
  __shared__ uint32_t thr_s;
  const ZOf z_of(temperature);
  constexpr int kPer = kSampleKeys / kFilterThreads;  // samples a thread
  static_assert(kSampleKeys % kFilterThreads == 0, "samples a thread");
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) sm.count[b] = 0u;
  if (threadIdx.x == 0) n_cand_s = 0u, n_bin_s = 0u;
  __syncthreads();
  uint32_t keys[kPer];  // this thread's samples j = threadIdx.x + s · blockDim.x
#pragma unroll
  for (int s = 0; s < kPer; s++) {
    const int i = int(int64_t(threadIdx.x + s * kFilterThreads) * vocab / kSampleKeys);
    keys[s] = float_key(z_of(logit_at(logits, i)));
    atomicAdd(&sm.count[keys[s] >> 20], 1u);
  }
  __syncthreads();
  // The threshold: the want-th largest sampled key, so that about want · vocab / kSampleKeys
  // logits pass. want is k's share of the samples plus 2.5 of its standard deviations plus 8 (at
  // least twice the share): fewer than k passing (then the histograms' passes, several times
  // slower) or more than kBinCand stays under ~1 row in 10,000 for k up to 1,024 (simulated on
  // N(0, 1) rows). The 12-bit histogram finds the sample's bin; the samples in it are then
  // ranked, unless more than kBinRank share it (then the bin's lower edge: more pass). The bin's
  // edge alone overshot: a boundary bin holds up to ~1,500 logits at k = 1,000, and 2 of the 256
  // sigma-4 rows of cuda_bench passed more than kBinCand.
  const double share = double(k) * kSampleKeys / vocab;
  const Mass want = Mass(fmax(ceil(2.0 * share), ceil(share + 2.5 * sqrt(share)) + 8.0));
  Mass above;
  const int bin = boundary_bin([&](int b) { return Mass(sm.count[b]); }, want, scratch, sm, &above);
  constexpr int kBinRank = 256;
  const int in_bin = bin >= 0 ? int(sm.count[bin]) : 0;
  if (threadIdx.x == 0) thr_s = uint32_t(max(bin, 0)) << 20;
  uint32_t* ranked = reinterpret_cast<uint32_t*>(sm.cand);  // [in_bin] the bin's sampled keys
  if (in_bin > 0 && in_bin <= kBinRank) {
#pragma unroll
    for (int s = 0; s < kPer; s++)
      if (int(keys[s] >> 20) == bin) ranked[atomicAdd(&n_bin_s, 1u)] = keys[s];
    __syncthreads();
    const int need = int(want - above);  // the need-th largest of the bin's samples, from 1
    for (int e = threadIdx.x; e < in_bin; e += blockDim.x) {
      const uint32_t key = ranked[e];
      int greater = 0, equal = 0;
      for (int f = 0; f < in_bin; f++) greater += ranked[f] > key, equal += ranked[f] == key;
      if (greater < need && need <= greater + equal) thr_s = key;  // (equal keys write alike)
    }
  }
  __syncthreads();
  const uint32_t thr = thr_s;
  for_each_logit(logits, vocab, sm.ring, [&](int i, float x) {
    const uint32_t key = float_key(z_of(x));
    const bool take = i < vocab && key >= thr;
    const unsigned takers = __ballot_sync(0xffffffffu, take);
    if (takers == 0u) return;
    const int lane = threadIdx.x & 31, leader = __ffs(takers) - 1;
    unsigned base = 0u;
    if (lane == leader) base = atomicAdd(&n_cand_s, unsigned(__popc(takers)));
    base = __shfl_sync(0xffffffffu, base, leader) + __popc(takers & ((1u << lane) - 1u));
    if (take && base < unsigned(kBinCand)) sm.cand[base] = cand_of(key, i);
  });
  __syncthreads();
  const int n = int(n_cand_s);
  if (n < k || n > kBinCand) return false;
  int pad_n = 1, pad_k = 1;  // the sorts' sizes over all n candidates and over about k
  while (pad_n < n) pad_n <<= 1;
  while (pad_k < k) pad_k <<= 1;
  sort_cand(sm, pad_n > pad_k ? keep_top_k(sm, n, k) : n);
  cut_at(sm.cand[k - 1], out_thr, out_cut);
  return true;
}

// Top-p over the top-k set sm.cand[0, k) sorted (key desc, id asc), k <= kFilterThreads: thread
// j weighs candidate j, one block scan gives every prefix's mass, and the kept prefix ends at the
// first reaching mass_target of the total; all weights 0 (an infinite zmax) keep the first. zmax
// is the first candidate that is not NaN (a NaN's key sorts at the top; the CPU's zmax skips
// NaN, and the k largest hold the largest number). Then draw stream 4's token: the first kept
// candidate whose prefix mass exceeds the draw point of the kept mass (a second scan). Returns
// the kept count; the cut's (key, id) and the drawn id.
__device__ int top_p_of_sorted(BinSmem& sm, int k, float top_p, MassTarget draw, Mass* scratch,
                               uint32_t* out_thr, int* out_cut, int* drawn) {
  __shared__ float zmax_s;
  auto z = [&](int j) { return key_float(cand_key(sm.cand[j])); };
  if (threadIdx.x == 0) {
    int j = 0;
    while (j < k - 1 && isnan(z(j))) j++;
    zmax_s = z(j);
  }
  __syncthreads();
  const SelectWeight mass{true, zmax_s, sm.top_p_tables};
  const int j = int(threadIdx.x);
  const Mass w = j < k ? mass(z(j)) : 0u;
  const Mass total = block_sum(w, scratch);
  Mass before;
  const int f = first_reaching(w, total ? mass_target(top_p, total) : ~0ull, scratch, sm, &before);
  const int m = f < k ? f + 1 : 1;
  cut_at(sm.cand[m - 1], out_thr, out_cut);
  int d = 0;  // every weight 0: the first
  if (total != 0u) {
    const Mass kept = sm.incl[m - 1];  // > 0: the prefix reaches its target
    d = first_reaching(j < m ? w : 0u, draw(kept), scratch, sm, &before);
  }
  *drawn = cand_id(sm.cand[d]);
  __syncthreads();
  return m;
}

// The cut inside a boundary bin of n elements (those in the filter with in_bin(key, z)): they
// are gathered, sorted by (key desc, id asc) and summed in that order until `need`, which gives
// the cut exactly as radix_select's ordered scan does. n: the bin's count, or more (the
// candidates' capacity; the gathered count is used). *kept (where given): the weight of the
// bin's elements down to the cut.
constexpr int kSortedCut = 512;  // boundary bins up to this size are sorted whole
template <class T, class InBin>
__device__ void cut_in_bin(const T* logits, int vocab, float temperature, SelectWeight wfn,
                           uint32_t thr0, int cut0, int n, Mass need, InBin in_bin,
                           uint32_t* out_thr, int* out_cut, Mass* scratch, BinSmem& sm,
                           Mass* kept = nullptr) {
  __shared__ unsigned n_cand_s;
  if (threadIdx.x == 0) n_cand_s = 0u;
  __syncthreads();
  const ZOf z_of(temperature);
  for_each_logit(logits, vocab, sm.ring, [&](int i, float x) {
    const float z = z_of(x);
    const uint32_t key = float_key(z);
    if (i < vocab && in_filter(key, i, thr0, cut0) && in_bin(key, z))
      sm.cand[atomicAdd(&n_cand_s, 1u)] = cand_of(key, i);
  });
  __syncthreads();
  n = int(n_cand_s);
  Mass kept_in_bin;
  if (n > kSortedCut) {  // a radix select over the bin, then the ties at one key sorted
    cut_of_candidates(sm, n, need, wfn, out_thr, out_cut, &kept_in_bin);
    if (kept) *kept = kept_in_bin;
    return;
  }
  sort_cand(sm, n);
  // Thread t takes candidates [t * per, (t + 1) * per) in order.
  const int per = (n + kFilterThreads - 1) / kFilterThreads;
  auto cand_w = [&](int j) -> Mass {
    if (j >= n) return 0u;
    return wfn.mass ? wfn(key_float(cand_key(sm.cand[j]))) : 1u;
  };
  Mass mine = 0u, before;
  for (int j = int(threadIdx.x) * per; j < (int(threadIdx.x) + 1) * per; j++) mine += cand_w(j);
  const int g = first_reaching(mine, need, scratch, sm, &before);
  int cut_j = n - 1;  // (the bin's weight reaches need: never taken)
  Mass cum = before;
  if (g < kFilterThreads) {
    cut_j = min(n, (g + 1) * per) - 1;
    for (int j = g * per; j < (g + 1) * per && j < n; j++) {
      cum += cand_w(j);
      if (cum >= need) {
        cut_j = j;
        break;
      }
    }
  }
  if (kept) *kept = cum;
  cut_at(sm.cand[cut_j], out_thr, out_cut);
  __syncthreads();
}

// Top-p's select by ZDigit: one histogram pass (lane slots, integer masses), the boundary bin's
// cut by cut_in_bin. Returns false, having changed nothing the caller reads, where every weight
// is 0 or the boundary bin holds more than kBinCand elements (bin_select then).
template <class T>
__device__ bool z_bin_select(const T* logits, int vocab, float temperature, SelectWeight wfn,
                             uint32_t thr0, int cut0, const MassTarget& rule, uint32_t* out_thr,
                             int* out_cut, Mass* scratch, BinSmem& sm,
                             const MassTarget* draw = nullptr, int* drawn = nullptr) {
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) sm.count[b] = 0u, sm.mass[b] = 0u;
  zero_lanes(sm);
  __syncthreads();
  const ZDigit digit{wfn.zmax};
  static_assert(kZBins << kZSpread == kLaneBins * 32 && kBins <= kLaneBins * 32,
                "ZDigit's slots, and a 12-bit digit's bins, are the lanes' slots");
  const DigitSums s =
      digit_histogram(logits, vocab, temperature, wfn, thr0, cut0, digit, 0, kZSpread, sm);
  __syncthreads();
  fold_lanes(sm, kZBins, kZSpread);
  const Mass m = block_sum(s.mass, scratch), skip_mass = block_sum(s.skip_mass, scratch);
  const uint32_t skip_count = uint32_t(block_sum(s.skip_count, scratch));
  if (threadIdx.x == 0) sm.count[0] = skip_count, sm.mass[0] = skip_mass;
  if (m == 0u) return false;
  const Mass target = rule(m);
  __syncthreads();
  Mass above;
  const int bin = boundary_bin([&](int b) { return sm.mass[b]; }, target, scratch, sm, &above);
  const int n = bin >= 0 ? int(sm.count[bin]) : 0;
  // The z bins' masses kept for the draw in sm.count past the bins' counts (a mass select's
  // cut_in_bin uses sm.mass and sm.cand, never sm.count).
  uint32_t* kept_mass = sm.count + kZBins;  // [kZBins] low words, then [kZBins] high
  static_assert(3 * kZBins <= kBins, "the z bins' masses fit in sm.count");
  for (int b = threadIdx.x; b < kZBins; b += blockDim.x)
    kept_mass[b] = uint32_t(sm.mass[b]), kept_mass[kZBins + b] = uint32_t(sm.mass[b] >> 32);
  __syncthreads();
  if (n == 0 || n > kBinCand) return false;
  auto in = [&](int b) { return [=](uint32_t, float z) { return digit(0u, z) == b; }; };
  Mass in_bin;
  cut_in_bin(logits, vocab, temperature, wfn, thr0, cut0, n, target - above, in(bin), out_thr,
             out_cut, scratch, sm, &in_bin);
  if (draw == nullptr) return true;
  // The draw (draw stream 4) from the same bins: its target within the kept mass, and the bin
  // that reaches it: the cut's bin (its kept elements gathered again), or a bin above it.
  const Mass target_d = (*draw)(above + in_bin);
  uint32_t thr_d = *out_thr;  // the cut's bin: its kept elements
  int cut_d = *out_cut, bin_d = bin, n_d = n;
  Mass need_d = target_d - above;
  if (target_d <= above) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x)
      sm.mass[b] = b < kZBins ? (Mass(kept_mass[kZBins + b]) << 32) | kept_mass[b] : 0u;
    __syncthreads();
    Mass above_d;
    bin_d = boundary_bin([&](int b) { return sm.mass[b]; }, target_d, scratch, sm, &above_d);
    n_d = bin_d >= 0 ? int(sm.count[bin_d]) : 0;
    __syncthreads();
    if (n_d == 0 || n_d > kBinCand) return true;  // (*drawn stays: the caller's select draws)
    thr_d = thr0, cut_d = cut0, need_d = target_d - above_d;
  }
  cut_in_bin(logits, vocab, temperature, wfn, thr_d, cut_d, n_d, need_d, in(bin_d), &thr_d, drawn,
             scratch, sm);
  return true;
}

// The filter's select in a few passes over the row (radix_select takes up to six, each weighing
// every element again): histograms of the keys' top 8 bits, then of the boundary bin's next 12
// and 12, each with the count and (mass) the weight of the elements in it; as soon as the
// boundary bin holds at most kBinCand elements, cut_in_bin. A mass is computed once for every
// filtered element (the first pass) and again only for those in a boundary bin. Returns false
// (the caller runs radix_select) when the ties at one key outnumber kBinCand or every weight is
// 0. A mass select's target comes from the first pass's total (rule); a count's is given.
template <class T>
__device__ bool bin_select(const T* logits, int vocab, float temperature, SelectWeight wfn,
                           uint32_t thr0, int cut0, Mass target, const MassTarget& rule,
                           uint32_t* out_thr, int* out_cut, Mass* scratch, BinSmem& sm) {
  uint32_t prefix = 0u;
  Mass above = 0u;
  const int shifts[3] = {24, 12, 0};  // digits of 8, 12 and 12 bits
  for (int level = 0; level < 3; level++) {
    const int shift = shifts[level];
    const uint32_t high_mask = level == 0 ? 0u : 0xffffffffu << shifts[level - 1];
    const uint32_t bin_mask = (level == 0 ? 0xffffffffu : ~high_mask) >> shift;
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) sm.count[b] = 0u, sm.mass[b] = 0u;
    zero_lanes(sm);
    __syncthreads();
    // The first digit's 256 bins through lane slots; the next digits' elements are spread over
    // 4,096 bins, a slot each.
    const KeyDigit digit{high_mask, prefix, bin_mask, shift};
    const int spread = level == 0 ? 5 : 0;
    Mass m =
        digit_histogram(logits, vocab, temperature, wfn, thr0, cut0, digit, -1, spread, sm).mass;
    __syncthreads();
    fold_lanes(sm, level == 0 ? kLaneBins : kBins, spread);
    if (level == 0 && wfn.mass) {
      m = block_sum(m, scratch);
      if (m == 0u) return false;
      target = rule(m);
    }
    __syncthreads();
    auto weight = [&](int b) { return bin_weight(sm, wfn, b); };
    Mass before;
    const int bin = boundary_bin(weight, target - above, scratch, sm, &before);
    if (bin < 0) return false;  // (the total reaches the target: never taken)
    above += before;
    prefix |= uint32_t(bin) << shift;
    const unsigned n = sm.count[bin];
    __syncthreads();
    if (n == 0u) return false;
    if (n > unsigned(kBinCand)) continue;  // refine the bin with the next bits
    const uint32_t mask = shift == 0 ? 0xffffffffu : 0xffffffffu << shift;
    cut_in_bin(
        logits, vocab, temperature, wfn, thr0, cut0, int(n), target - above,
        [&](uint32_t key, float) { return (key & mask) == prefix; }, out_thr, out_cut, scratch, sm);
    return true;
  }
  return false;  // more than kBinCand ties at one key
}

}  // namespace loom::gpu
