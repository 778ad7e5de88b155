#include <cuda_bf16.h>

#include <cfloat>
#include <climits>

#include "core/philox.h"
#include "kernels/common.cuh"
#include "kernels/sampling.cuh"

namespace loom::gpu {

constexpr int kFilterThreads = 1024;
constexpr int kDrawThreads = 256;
constexpr size_t kDrawMaxSmem = 160 * 1024;  // v̂ of one chunk: vocab up to 2,621,440

struct SampleFilter {
  uint32_t thr;    // key threshold
  int32_t id_cut;  // ties at thr kept up to this id
  int32_t listed;  // > 0: the kept set is these ids of the row's list (top-k <= kSampleList)
  int32_t pad;
};
struct SamplePartial {
  float v;
  int32_t i;
};

// Monotone map of a float to uint32: a < b  ⇔  key(a) < key(b).
__device__ __forceinline__ uint32_t float_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Logits come as fp32, or as the bf16 the lm_head GEMM writes (widened exactly on load).
__device__ __forceinline__ float logit_at(const float* lg, int i) {
  return __ldg(lg + i);
}
__device__ __forceinline__ float logit_at(const __nv_bfloat16* lg, int i) {
  return __bfloat162float(lg[i]);
}

// x[u] = logit base + u * stride for those below end (0 beyond): all of a thread's loads issued
// before any is used (bytes in flight; one load a thread left the passes latency-bound).
template <int N, class T>
__device__ __forceinline__ void load_strided(const T* lg, int base, int stride, int end,
                                             float (&x)[N]) {
#pragma unroll
  for (int u = 0; u < N; u++) {
    const int i = base + u * stride;
    x[u] = i < end ? logit_at(lg, i) : 0.0f;
  }
}
constexpr int kFilterBatch = 4;  // logits a filter thread loads at a time

__device__ __forceinline__ bool in_filter(uint32_t key, int i, uint32_t thr, int id_cut) {
  return key > thr || (key == thr && i <= id_cut);
}

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ double block_sum_d(double v, double* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum_d(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double t = lane < int(blockDim.x >> 5) ? scratch[lane] : 0.0;
  return warp_sum_d(t);
}

// Inclusive prefix sum over the block (thread order); scratch holds 32 doubles.
__device__ double block_scan_d(double v, double* scratch, double* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = x;
  __syncthreads();
  double before = 0.0, all = 0.0;
  for (int w = 0; w < int(blockDim.x >> 5); w++) {
    if (w < warp) before += scratch[w];
    all += scratch[w];
  }
  *total = all;
  return before + x;
}

// Weight of element i in a select: 1 (count) or its unnormalised probability (mass).
struct SelectWeight {
  bool mass;
  float zmax;
  __device__ double operator()(float z) const { return mass ? exp(double(z) - double(zmax)) : 1.0; }
};

// f(i, x) for every logit x = logits[i] of the row in block-strided order, kFilterBatch loads in
// flight a thread; i >= vocab passes x = 0. The trip count is the block's, so f may hold a warp
// collective.
template <class T, class F>
__device__ __forceinline__ void for_each_logit(const T* logits, int vocab, F&& f) {
  for (int base = 0; base < vocab; base += kFilterBatch * int(blockDim.x)) {
    float x[kFilterBatch];
    load_strided(logits, base + int(threadIdx.x), int(blockDim.x), vocab, x);
#pragma unroll
    for (int u = 0; u < kFilterBatch; u++) f(base + u * int(blockDim.x) + int(threadIdx.x), x[u]);
  }
}

// One digit's histogram over the elements with in_filter(key, i, thr0, cut0) whose key equals
// prefix under high_mask: counts[slot] += 1 and, for a mass select, mass[slot] += the weight,
// slot = (((key >> shift) & bin_mask) << spread) + (spread ? lane : 0). With spread 5 each lane
// has its own slot of a bin (fold_lanes sums them): the top digits of real logits fall into a
// few bins, and a warp's lanes adding to one shared address serialise, fp64 ones as
// compare-and-swap loops. Returns the thread's sum of those weights (0 for counts).
template <class T>
__device__ double digit_histogram(const T* logits, int vocab, float temperature, SelectWeight wfn,
                                  uint32_t thr0, int cut0, uint32_t high_mask, uint32_t prefix,
                                  int shift, uint32_t bin_mask, int spread, uint32_t* counts,
                                  double* mass) {
  const int lane = spread ? int(threadIdx.x & 31) : 0;
  double m = 0.0;
  for_each_logit(logits, vocab, [&](int i, float x) {
    if (i >= vocab) return;
    const float z = x / temperature;
    const uint32_t key = float_key(z);
    if (!in_filter(key, i, thr0, cut0) || (key & high_mask) != prefix) return;
    const int slot = (int((key >> shift) & bin_mask) << spread) + lane;
    atomicAdd(&counts[slot], 1u);
    if (wfn.mass) {
      const double w = wfn(z);
      m += w;
      atomicAdd(&mass[slot], w);
    }
  });
  return m;
}

constexpr int kBins = 4096, kBinCand = 4096;
constexpr int kBinsPerThread = kBins / kFilterThreads;  // the boundary search's share
constexpr int kLaneBins = 256;                          // bins of an 8-bit digit
struct BinSmem {  // dynamic shared memory of sample_filter_kernel
  uint32_t count[kBins];
  double mass[kBins];
  double incl[kFilterThreads];  // inclusive prefix sums, thread order
  union {
    unsigned long long cand[kBinCand];  // (~key << 32) | id: ascending = (key desc, id asc)
    struct {                            // an 8-bit digit's histogram, a slot a lane (spread 5)
      uint32_t count[kLaneBins * 32];
      double mass[kLaneBins * 32];
    } lanes;
  };
};

__device__ void zero_lanes(BinSmem& sm) {
  for (int j = threadIdx.x; j < kLaneBins * 32; j += blockDim.x)
    sm.lanes.count[j] = 0u, sm.lanes.mass[j] = 0.0;
}

// count[b], mass[b] for b < kLaneBins: the sums of bin b's 32 lane slots, in lane order from a
// rotated start (bin b starts at lane b % 32: no bank conflicts; a fixed order a bin).
__device__ void fold_lanes(BinSmem& sm, uint32_t* count, double* mass) {
  for (int b = threadIdx.x; b < kLaneBins; b += blockDim.x) {
    uint32_t c = 0u;
    double m = 0.0;
    for (int j = 0; j < 32; j++) {
      const int slot = b * 32 + ((b + j) & 31);
      c += sm.lanes.count[slot];
      m += sm.lanes.mass[slot];
    }
    count[b] = c;
    mass[b] = m;
  }
}

// Over the elements with in_filter(key, i, thr0, cut0), finds the largest key v with
// W(key >= v) >= target and the id cut among ties at v at which the prefix (order: key desc,
// id asc) first reaches target. z = logit / temperature, as the CPU computes it.
template <class T>
__device__ void radix_select(const T* logits, int vocab, float temperature, SelectWeight wfn,
                             uint32_t thr0, int cut0, double target, uint32_t* out_thr,
                             int* out_cut, double* scratch, BinSmem& sm) {
  __shared__ uint32_t prefix_s;
  __shared__ double above_s, tie_w_s;
  __shared__ int cut_s;
  uint32_t prefix = 0;
  double above = 0.0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    zero_lanes(sm);
    __syncthreads();
    const uint32_t high_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    digit_histogram(logits, vocab, temperature, wfn, thr0, cut0, high_mask, prefix & high_mask,
                    shift, 255u, 5, sm.lanes.count, sm.lanes.mass);
    __syncthreads();
    fold_lanes(sm, sm.count, sm.mass);
    __syncthreads();
    if (threadIdx.x == 0) {
      auto weight = [&](int b) { return wfn.mass ? sm.mass[b] : double(sm.count[b]); };
      double cum = above;
      int chosen = 0;
      for (int b = kLaneBins - 1; b >= 0; b--) {
        if (cum + weight(b) >= target) {
          chosen = b;
          break;
        }
        cum += weight(b);
      }
      prefix_s = prefix | (uint32_t(chosen) << shift);
      above_s = cum;
      tie_w_s = weight(chosen);
    }
    __syncthreads();
    prefix = prefix_s;
    above = above_s;
  }
  const uint32_t v = prefix;
  int cut = INT_MAX;
  // Ties at v: with one tie, or a count select whose ties all fit, every tie is kept.
  const bool scan = wfn.mass ? true : (above + tie_w_s > target + 0.5);
  if (scan) {
    if (threadIdx.x == 0) cut_s = INT_MAX;
    __syncthreads();
    double cum = above;
    for (int base = 0; base < vocab; base += blockDim.x) {
      const int i = base + threadIdx.x;
      double w = 0.0;
      bool tie = false;
      if (i < vocab) {
        const float z = logit_at(logits, i) / temperature;
        const uint32_t key = float_key(z);
        if (key == v && in_filter(key, i, thr0, cut0)) {
          tie = true;
          w = wfn(z);
        }
      }
      double total;
      const double inc = block_scan_d(w, scratch, &total);
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
__device__ int first_reaching(double w, double target, double* scratch, BinSmem& sm,
                              double* before) {
  __shared__ int first_s;
  double total;
  const double inc = block_scan_d(w, scratch, &total);
  sm.incl[threadIdx.x] = inc;
  if (threadIdx.x == 0) first_s = kFilterThreads;
  __syncthreads();
  if (inc >= target) atomicMin(&first_s, int(threadIdx.x));
  __syncthreads();
  const int f = first_s;
  *before = f > 0 && f < kFilterThreads ? sm.incl[f - 1] : 0.0;
  __syncthreads();
  return f;
}

// The bin (of kBins, from the top) at which the weight summed from the top first reaches target,
// and *above, the weight of the bins above it; -1 when the total stays short of target.
template <class W>
__device__ int boundary_bin(W weight, double target, double* scratch, BinSmem& sm, double* above) {
  const int top = kBins - 1 - kBinsPerThread * int(threadIdx.x);  // kBinsPerThread a thread
  double w = 0.0;
  for (int b = top; b > top - kBinsPerThread; b--) w += weight(b);
  const int f = first_reaching(w, target, scratch, sm, above);
  if (f == kFilterThreads) return -1;
  int bin = kBins - 1 - kBinsPerThread * f;
  for (int k = 1; k < kBinsPerThread && *above + weight(bin) < target; k++) *above += weight(bin--);
  return bin;
}

// Sorts sm.cand[0, n) ascending (key desc, id asc) by a bitonic sort over the next power of two.
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
      __syncthreads();
    }
}

__device__ __forceinline__ unsigned long long cand_of(uint32_t key, int i) {
  return (static_cast<unsigned long long>(~key) << 32) | uint32_t(i);
}

// Top-k in one pass over the row, for k <= kSampledTopK: the keys of kSampleKeys logits spread
// over the row give a threshold that k and a margin pass (their top 12 bits' histogram),
// the pass gathers every logit at or above it, and the k-th of those sorted is the cut. Leaves
// sm.cand[0, k) sorted (key desc, id asc). Returns false (the caller runs bin_select) when
// fewer than k or more than kBinCand logits pass.
constexpr int kSampleKeys = 4 * kFilterThreads, kSampledTopK = kSampleList;
template <class T>
__device__ bool sampled_top_k(const T* logits, int vocab, float temperature, int k,
                              uint32_t* out_thr, int* out_cut, double* scratch, BinSmem& sm) {
  __shared__ unsigned n_cand_s;
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) sm.count[b] = 0u;
  if (threadIdx.x == 0) n_cand_s = 0u;
  __syncthreads();
  for (int j = threadIdx.x; j < kSampleKeys; j += blockDim.x) {
    const int i = int(int64_t(j) * vocab / kSampleKeys);
    atomicAdd(&sm.count[float_key(logit_at(logits, i) / temperature) >> 20], 1u);
  }
  __syncthreads();
  // Samples at or above the threshold: twice k's share of them, and at least the share plus two
  // of its standard deviations plus 8, so that fewer than k logits pass (then the histograms'
  // passes, several times slower) in well under 1 row in 1,000 for any k. With twice the share
  // alone (2 samples at k = 50) ~5% of top-k 50 rows fell short, and at 256 rows nearly every
  // wave of the filter waited on one of them (simulated on N(0, 1) and N(0, 4) rows).
  const double share = double(k) * kSampleKeys / vocab;
  const double want = fmax(ceil(2.0 * share), ceil(share + 2.0 * sqrt(share)) + 8.0);
  double above;
  const int bin =
      boundary_bin([&](int b) { return double(sm.count[b]); }, want, scratch, sm, &above);
  const uint32_t thr = uint32_t(max(bin, 0)) << 20;
  for_each_logit(logits, vocab, [&](int i, float x) {
    const uint32_t key = float_key(x / temperature);
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
  sort_cand(sm, n);
  const unsigned long long c = sm.cand[k - 1];
  *out_thr = ~uint32_t(c >> 32);
  *out_cut = int(uint32_t(c));
  return true;
}

// Top-p over the top-k set sm.cand[0, k) sorted (key desc, id asc): the CPU's weights (one fp64
// exp each, computed in parallel into sm.mass) summed by one thread in the CPU's order (k <=
// kSampledTopK; a thread computing the 2 k exps itself took ~240 us a row at k = 1,000).
// Returns the cut's (key, id) and the kept count.
__device__ int top_p_of_sorted(BinSmem& sm, int k, float top_p, uint32_t* out_thr, int* out_cut) {
  __shared__ int m_s;
  auto z = [&](int j) { return double(key_float(~uint32_t(sm.cand[j] >> 32))); };
  const double zmax = z(0);
  for (int j = threadIdx.x; j < k; j += blockDim.x) sm.mass[j] = exp(z(j) - zmax);
  __syncthreads();
  if (threadIdx.x == 0) {
    double mass = 0.0;
    for (int j = 0; j < k; j++) mass += sm.mass[j];
    const double target = double(top_p) * mass;
    double cum = 0.0;
    int m = 0;
    while (m < k) {
      cum += sm.mass[m++];
      if (cum >= target) break;
    }
    m_s = m;
  }
  __syncthreads();
  const int m = m_s;
  const unsigned long long c = sm.cand[m - 1];
  *out_thr = ~uint32_t(c >> 32);
  *out_cut = int(uint32_t(c));
  __syncthreads();
  return m;
}

// The filter's select in a few passes over the row (radix_select takes up to six, each weighing
// every element again): histograms of the keys' top 8 bits, then of the boundary bin's next 12
// and 12, each with the count and (mass) the fp64 weight of the elements in it; as soon as the
// boundary bin holds at most kBinCand elements they are gathered, sorted by (key desc, id asc)
// and summed in that order, which gives the cut exactly as radix_select's ordered scan does.
// A mass is computed once for every filtered element (the first pass) and again only for those
// in a boundary bin. Returns false (the caller runs radix_select) when the ties at one key
// outnumber kBinCand or the weights are not finite.
template <class T>
__device__ bool bin_select(const T* logits, int vocab, float temperature, SelectWeight wfn,
                           uint32_t thr0, int cut0, double target, float frac, uint32_t* out_thr,
                           int* out_cut, double* scratch, BinSmem& sm) {
  __shared__ unsigned n_cand_s;
  uint32_t prefix = 0u;
  double above = 0.0;
  const int shifts[3] = {24, 12, 0};  // digits of 8, 12 and 12 bits
  for (int level = 0; level < 3; level++) {
    const int shift = shifts[level];
    const uint32_t high_mask = level == 0 ? 0u : 0xffffffffu << shifts[level - 1];
    const uint32_t bin_mask = (level == 0 ? 0xffffffffu : ~high_mask) >> shift;
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) sm.count[b] = 0u, sm.mass[b] = 0.0;
    if (level == 0) zero_lanes(sm);
    __syncthreads();
    // The first digit's 256 bins through lane slots; the next digits' elements are spread over
    // 4,096 bins, so they add to the bins directly.
    double m = level == 0
                   ? digit_histogram(logits, vocab, temperature, wfn, thr0, cut0, high_mask, prefix,
                                     shift, bin_mask, 5, sm.lanes.count, sm.lanes.mass)
                   : digit_histogram(logits, vocab, temperature, wfn, thr0, cut0, high_mask, prefix,
                                     shift, bin_mask, 0, sm.count, sm.mass);
    if (level == 0) {
      __syncthreads();
      fold_lanes(sm, sm.count, sm.mass);
    }
    if (level == 0 && wfn.mass) {
      m = block_sum_d(m, scratch);
      if (!isfinite(m)) return false;
      target = double(frac) * m;
    }
    __syncthreads();
    auto weight = [&](int b) { return wfn.mass ? sm.mass[b] : double(sm.count[b]); };
    double before;
    const int bin = boundary_bin(weight, target - above, scratch, sm, &before);
    if (bin < 0) return false;  // rounding left the total short of the target
    above += before;
    prefix |= uint32_t(bin) << shift;
    const unsigned n = sm.count[bin];
    __syncthreads();
    if (n == 0u) return false;
    if (n > unsigned(kBinCand)) continue;  // refine the bin with the next bits

    // Gather the bin's elements, sort them, sum them in order.
    const uint32_t mask = shift == 0 ? 0xffffffffu : 0xffffffffu << shift;
    if (threadIdx.x == 0) n_cand_s = 0u;
    __syncthreads();
    for_each_logit(logits, vocab, [&](int i, float x) {
      const uint32_t key = float_key(x / temperature);
      if (i < vocab && in_filter(key, i, thr0, cut0) && (key & mask) == prefix)
        sm.cand[atomicAdd(&n_cand_s, 1u)] = cand_of(key, i);
    });
    sort_cand(sm, int(n));
    // Thread t takes candidates [t * per, (t + 1) * per) in order.
    const int per = (int(n) + kFilterThreads - 1) / kFilterThreads;
    auto cand_w = [&](int j) {
      if (j >= int(n)) return 0.0;
      return wfn.mass ? wfn(key_float(~uint32_t(sm.cand[j] >> 32))) : 1.0;
    };
    double mine = 0.0;
    for (int j = int(threadIdx.x) * per; j < (int(threadIdx.x) + 1) * per; j++) mine += cand_w(j);
    const int g = first_reaching(mine, target - above, scratch, sm, &before);
    int cut_j = int(n) - 1;  // rounding short of the target: the whole bin
    if (g < kFilterThreads) {
      cut_j = min(int(n), (g + 1) * per) - 1;
      double cum = before;
      for (int j = g * per; j < (g + 1) * per && j < int(n); j++) {
        cum += cand_w(j);
        if (cum >= target - above) {
          cut_j = j;
          break;
        }
      }
    }
    const unsigned long long c = sm.cand[cut_j];
    *out_thr = ~uint32_t(c >> 32);
    *out_cut = int(uint32_t(c));
    __syncthreads();
    return true;
  }
  return false;  // more than kBinCand ties at one key
}

template <class T>
__global__ void __launch_bounds__(kFilterThreads)
    sample_filter_kernel(const T* logits, int vocab, int ld, const SampleParamsDev* params,
                         SampleFilter* filters, int32_t* lists) {
  __shared__ double scratch[32];
  __shared__ float fscratch[32];
  extern __shared__ __align__(16) unsigned char filter_smem[];
  BinSmem& sm = *reinterpret_cast<BinSmem*>(filter_smem);
  pdl_trigger();
  pdl_wait();  // the logits come from the kernel before (see sample_tokens' pdl)
  const int row = blockIdx.x;
  const SampleParamsDev p = params[row];
  const bool top_k_on = p.top_k > 0 && p.top_k < vocab;
  const bool top_p_on = p.top_p < 1.0f;
  if (!p.active || p.temperature <= 0.0f || (!top_k_on && !top_p_on)) {
    if (threadIdx.x == 0) filters[row] = SampleFilter{0u, INT_MAX, 0, 0};
    return;
  }
  const T* lg = logits + size_t(row) * ld;
  const float t = p.temperature;
  uint32_t thr = 0u;
  int cut = INT_MAX;
  if (top_k_on && p.top_k <= kSampledTopK && vocab >= 16 * kSampleKeys &&
      sampled_top_k(lg, vocab, t, p.top_k, &thr, &cut, scratch, sm)) {
    const int kept = top_p_on ? top_p_of_sorted(sm, p.top_k, p.top_p, &thr, &cut) : p.top_k;
    for (int j = threadIdx.x; j < kept; j += blockDim.x)  // the draw reads these, not the row
      lists[size_t(row) * kSampleList + j] = int32_t(uint32_t(sm.cand[j]));
    if (threadIdx.x == 0) filters[row] = SampleFilter{thr, cut, kept, 0};
    return;
  }
  float zmax = -INFINITY;  // (top-p's weights only)
  for (int i = threadIdx.x; top_p_on && i < vocab; i += blockDim.x)
    zmax = fmaxf(zmax, logit_at(lg, i) / t);
  {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    zmax = warp_max(zmax);
    if (lane == 0) fscratch[warp] = zmax;
    __syncthreads();
    zmax = warp_max(lane < int(blockDim.x >> 5) ? fscratch[lane] : -INFINITY);
  }
  const SelectWeight count{false, zmax};
  if (top_k_on &&
      !bin_select(lg, vocab, t, count, 0u, INT_MAX, double(p.top_k), 0.0f, &thr, &cut, scratch, sm))
    radix_select(lg, vocab, t, count, 0u, INT_MAX, double(p.top_k), &thr, &cut, scratch, sm);
  if (top_p_on) {
    const SelectWeight mass{true, zmax};
    uint32_t thr2;
    int cut2;
    if (!bin_select(lg, vocab, t, mass, thr, cut, 0.0, p.top_p, &thr2, &cut2, scratch, sm)) {
      double m = 0.0;
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        const float z = logit_at(lg, i) / t;
        if (in_filter(float_key(z), i, thr, cut)) m += mass(z);
      }
      m = block_sum_d(m, scratch);
      radix_select(lg, vocab, t, mass, thr, cut, double(p.top_p) * m, &thr2, &cut2, scratch, sm);
    }
    thr = thr2;
    cut = cut2;
  }
  if (threadIdx.x == 0) filters[row] = SampleFilter{thr, cut, 0, 0};
}

__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  return bi < 0 || v > bv || (v == bv && i < bi);
}

// Partial argmax over one chunk of a row: of the logits (greedy), or of v = z + g over the kept
// set, z = logit / T, g = gumbel_noise(u) (two fp64 logarithms). Draw stream 2 gives tokens
// 4 j .. 4 j + 3 the four words of one Philox call, so a thread takes such groups whole and
// runs one Philox for the group's kept logits (none where a filter keeps none of the four).
// The fp64 noise is computed only where it can matter: pass 1 stores v̂ = ẑ +
// gumbel_noise_estimate(u) (float logs; ẑ = logit · (1/T) where no filter needs the exact z,
// else z) of every kept logit of the chunk in shared memory and takes the chunk's max M̂; pass 2
// computes the exact v only where v̂ >= M̂ - slack and takes the argmax of those. |v̂ - v| <= d =
// kGumbelEstimateErr + 2^-22 (|z| + 17) (the noise estimate's bound, ẑ's 1.5 ulp and one
// rounding of each sum), so the chunk's exact winner w has v̂_w >= v_w - d >= v_k - d >= M̂ - 2d
// for the k with v̂_k = M̂; near the top |z| <= |M̂| + 20, slack is more than 2d, and the token
// is the exact definition's. Non-finite v̂ (infinite or NaN logits) make pass 2 exact for every
// kept logit of the chunk. Typically pass 2 runs one fp64 noise a chunk, not 4,100.
__device__ __forceinline__ float draw_slack(float m) {
  return 4.0f * kGumbelEstimateErr + (fabsf(m) + 32.0f) * (1.0f / 524288.0f);
}

constexpr int kDrawGroups = 4;  // groups of 4 logits a thread loads before using any

// x = logits i .. i + 3 (i a multiple of 4; 0 at or past end): one 16-byte (f32) or 8-byte
// (bf16) load where all four are in range and the row is aligned to that, else four.
__device__ __forceinline__ void load4(const float* lg, int i, int end, bool aligned,
                                      float (&x)[4]) {
  if (aligned && i + 3 < end) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(lg + i));
    x[0] = q.x, x[1] = q.y, x[2] = q.z, x[3] = q.w;
  } else {
    load_strided(lg, i, 1, end, x);
  }
}
__device__ __forceinline__ void load4(const __nv_bfloat16* lg, int i, int end, bool aligned,
                                      float (&x)[4]) {
  if (aligned && i + 3 < end) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(lg + i));
    x[0] = __uint_as_float(q.x << 16), x[1] = __uint_as_float(q.x & 0xffff0000u);
    x[2] = __uint_as_float(q.y << 16), x[3] = __uint_as_float(q.y & 0xffff0000u);
  } else {
    load_strided(lg, i, 1, end, x);
  }
}

// A row's groups of 4 logits (one Philox call's): draw block c takes groups [c per, (c + 1) per),
// per = groups / kSampleChunks, and the last block also the remainder (Terra: 63 blocks of
// 1,024 groups, one of 1,025). draw_max_groups is the largest block's count.
__host__ __device__ inline int draw_groups(int vocab) {
  return (vocab + 3) / 4;
}
__host__ __device__ inline int draw_max_groups(int vocab) {
  return draw_groups(vocab) - (kSampleChunks - 1) * (draw_groups(vocab) / kSampleChunks);
}

// x[k] = the groups g0 + k kDrawThreads of a thread's batch (load4 each).
template <class T>
__device__ __forceinline__ void load_groups(const T* lg, int g0, int end, bool aligned,
                                            float (&x)[kDrawGroups][4]) {
#pragma unroll
  for (int k = 0; k < kDrawGroups; k++) load4(lg, 4 * (g0 + k * kDrawThreads), end, aligned, x[k]);
}

template <class T>
__global__ void __launch_bounds__(kDrawThreads)
    sample_draw_kernel(const T* logits, int vocab, int ld, const SampleParamsDev* params,
                       const SampleFilter* filters, const int32_t* lists, SamplePartial* partials) {
  extern __shared__ float4 vhat[];  // [g_end - g_begin] v̂ of the block's groups, -inf: not kept
  __shared__ float sv[kDrawThreads / 32];
  __shared__ int si[kDrawThreads / 32];
  __shared__ int irregular;
  pdl_trigger();
  pdl_wait();
  const int row = blockIdx.y, chunk = blockIdx.x;
  const SampleParamsDev p = params[row];
  const T* lg = logits + size_t(row) * ld;
  const int per = draw_groups(vocab) / kSampleChunks;
  const int g_begin = chunk * per;  // the block's groups
  const int g_end = chunk == kSampleChunks - 1 ? draw_groups(vocab) : g_begin + per;
  const int end = min(vocab, 4 * g_end);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float bv = -INFINITY;
  int bi = -1;
  // A thread takes groups of 4 logits (one Philox call's), kDrawGroups at a time, all loads
  // issued before any is used: one load in flight per thread left the draw latency-bound.
  const bool aligned = reinterpret_cast<uintptr_t>(lg) % (4 * sizeof(T)) == 0;
  if (p.active && p.temperature <= 0.0f) {
    for (int g0 = g_begin + threadIdx.x; g0 < g_end; g0 += kDrawGroups * kDrawThreads) {
      float x[kDrawGroups][4];
      load_groups(lg, g0, end, aligned, x);
#pragma unroll
      for (int k = 0; k < kDrawGroups; k++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int i = 4 * (g0 + k * kDrawThreads) + j;
          if (i < end && better(x[k][j], i, bv, bi)) bv = x[k][j], bi = i;
        }
    }
  } else if (p.active && filters[row].listed > 0) {
    // The filter listed the kept ids (at most kSampleList): block 0 draws them with the exact
    // noise, the other blocks of the row have nothing to do.
    const int n = filters[row].listed;
    for (int j = threadIdx.x; chunk == 0 && j < n; j += blockDim.x) {
      const int i = lists[size_t(row) * kSampleList + j];
      const float u = philox_uniform(p.seed, p.sample_index, p.draw_index, uint32_t(i));
      const float v = logit_at(lg, i) / p.temperature + gumbel_noise(u);
      if (better(v, i, bv, bi)) bv = v, bi = i;
    }
  } else if (p.active) {
    const SampleFilter f = filters[row];
    const float t = p.temperature, inv_t = 1.0f / t;
    const bool filtered = f.thr != 0u || f.id_cut != INT_MAX;  // top-k / top-p on this row
    if (threadIdx.x == 0) irregular = 0;
    __syncthreads();
    float m = -INFINITY;
    float odd = 0.0f;  // NaN once a kept v̂ is infinite or NaN: fma(v̂, 0, odd), one op a logit
    for (int g0 = g_begin + threadIdx.x; g0 < g_end; g0 += kDrawGroups * kDrawThreads) {
      float x[kDrawGroups][4];
      load_groups(lg, g0, end, aligned, x);
#pragma unroll
      for (int k = 0; k < kDrawGroups; k++) {
        const int g = g0 + k * kDrawThreads;
        if (g >= g_end) break;
        float z[4];
        bool kept[4], any = false;
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int i = 4 * g + j;
          z[j] = filtered ? x[k][j] / t : x[k][j] * inv_t;
          kept[j] = i < end && (!filtered || in_filter(float_key(z[j]), i, f.thr, f.id_cut));
          any |= kept[j];
        }
        float4 out = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        if (any) {  // the group's noise computed whole, then masked: no branch a logit
          const Philox4 r = philox_group(p.seed, p.sample_index, p.draw_index, uint32_t(g));
          float vh[4];
#pragma unroll
          for (int j = 0; j < 4; j++) {
            const float v = z[j] + gumbel_noise_estimate(uniform_from_bits(r.v[j]));
            vh[j] = kept[j] ? v : -INFINITY;
            odd = fmaf(kept[j] ? v : 0.0f, 0.0f, odd);
            m = fmaxf(m, vh[j]);
          }
          out = make_float4(vh[0], vh[1], vh[2], vh[3]);
        }
        vhat[g - g_begin] = out;
      }
    }
    if (odd != odd) irregular = 1;
    m = warp_max(m);
    if (lane == 0) sv[warp] = m;
    __syncthreads();
    m = sv[0];
    for (int w = 1; w < kDrawThreads / 32; w++) m = fmaxf(m, sv[w]);
    const bool exact_all = irregular != 0;
    const float thr = m - draw_slack(m);
    if (exact_all || m > -INFINITY) {
      for (int g = g_begin + threadIdx.x; g < g_end; g += blockDim.x) {
        const float4 q = vhat[g - g_begin];
        const float vh[4] = {q.x, q.y, q.z, q.w};
        if (!exact_all && !(vh[0] >= thr || vh[1] >= thr || vh[2] >= thr || vh[3] >= thr)) continue;
        const Philox4 r = philox_group(p.seed, p.sample_index, p.draw_index, uint32_t(g));
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int i = 4 * g + j;
          if (i >= end || (!exact_all && !(vh[j] >= thr))) continue;
          const float z = logit_at(lg, i) / t;
          if (exact_all && !in_filter(float_key(z), i, f.thr, f.id_cut)) continue;
          const float v = z + gumbel_noise(uniform_from_bits(r.v[j]));  // fp64 logs, one rounding
          if (better(v, i, bv, bi)) bv = v, bi = i;
        }
      }
    }
    __syncthreads();  // sv is reused below
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (oi >= 0 && better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  if (lane == 0) sv[warp] = bv, si[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kDrawThreads / 32; w++)
      if (si[w] >= 0 && better(sv[w], si[w], bv, bi)) bv = sv[w], bi = si[w];
    partials[size_t(row) * kSampleChunks + chunk] = SamplePartial{bv, bi};
  }
}

__global__ void sample_final_kernel(const SampleParamsDev* params, const SamplePartial* partials,
                                    int32_t* tokens) {
  pdl_wait();
  const int row = blockIdx.x;
  const int lane = threadIdx.x;
  float bv = -INFINITY;
  int bi = -1;
  for (int c = lane; c < kSampleChunks; c += 32) {
    const SamplePartial q = partials[size_t(row) * kSampleChunks + c];
    if (q.i >= 0 && better(q.v, q.i, bv, bi)) bv = q.v, bi = q.i;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (oi >= 0 && better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  if (lane == 0) tokens[row] = params[row].active ? bi : -1;
}

template <class T>
static Status sample_tokens_t(const T* logits, int n_rows, int vocab, int ld,
                              const SampleParamsDev* params, void* workspace, int32_t* tokens,
                              cudaStream_t stream, bool pdl) {
  LOOM_ARG_CHECK(n_rows >= 0 && vocab > 0 && ld >= vocab, "sample_tokens: n_rows ", n_rows,
                 ", vocab ", vocab, ", ld ", ld);
  LOOM_ARG_CHECK(logits && params && workspace && tokens, "sample_tokens: null pointer");
  if (n_rows == 0) return Status::good();
  auto* filters = static_cast<SampleFilter*>(workspace);
  auto* partials = reinterpret_cast<SamplePartial*>(static_cast<char*>(workspace) +
                                                    size_t(n_rows) * sizeof(SampleFilter));
  auto* lists = reinterpret_cast<int32_t*>(partials + size_t(n_rows) * kSampleChunks);
  // Each kernel waits (pdl_wait) before it reads anything, so all three may be launched with
  // programmatic dependent launch; the filter only when the caller says its predecessor is a
  // kernel (pdl), the other two always follow this function's own kernels.
  static const cudaError_t filter_smem_set = cudaFuncSetAttribute(
      sample_filter_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sizeof(BinSmem)));
  if (filter_smem_set != cudaSuccess)
    return Status::bad(cat("sample_filter: shared memory: ", cudaGetErrorString(filter_smem_set)));
  cudaError_t e =
      launch_kernel(sample_filter_kernel<T>, dim3(n_rows), dim3(kFilterThreads), sizeof(BinSmem),
                    stream, pdl, logits, vocab, ld, params, filters, lists);
  if (e != cudaSuccess) return Status::bad(cat("sample_filter: launch: ", cudaGetErrorString(e)));
  Status st = launch_status("sample_filter");
  if (!st.ok) return st;
  const size_t vhat_bytes = size_t(draw_max_groups(vocab)) * sizeof(float4);
  LOOM_ARG_CHECK(vhat_bytes <= kDrawMaxSmem, "sample_tokens: vocab ", vocab,
                 " is above the device draw's limit of ", kDrawMaxSmem / 4 * kSampleChunks);
  static const cudaError_t smem_set = cudaFuncSetAttribute(
      sample_draw_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kDrawMaxSmem));
  if (smem_set != cudaSuccess)
    return Status::bad(cat("sample_draw: shared memory: ", cudaGetErrorString(smem_set)));
  e = launch_kernel(sample_draw_kernel<T>, dim3(kSampleChunks, n_rows), dim3(kDrawThreads),
                    vhat_bytes, stream, true, logits, vocab, ld, params,
                    static_cast<const SampleFilter*>(filters), static_cast<const int32_t*>(lists),
                    partials);
  if (e != cudaSuccess) return Status::bad(cat("sample_draw: launch: ", cudaGetErrorString(e)));
  st = launch_status("sample_draw");
  if (!st.ok) return st;
  e = launch_kernel(sample_final_kernel, dim3(n_rows), dim3(32), 0, stream, true, params,
                    static_cast<const SamplePartial*>(partials), tokens);
  if (e != cudaSuccess) return Status::bad(cat("sample_final: launch: ", cudaGetErrorString(e)));
  return launch_status("sample_final");
}

Status sample_tokens(DType t, const void* logits, int n_rows, int vocab, int ld,
                     const SampleParamsDev* params, void* workspace, int32_t* tokens,
                     cudaStream_t stream, bool pdl) {
  if (t == DType::BF16)
    return sample_tokens_t(static_cast<const __nv_bfloat16*>(logits), n_rows, vocab, ld, params,
                           workspace, tokens, stream, pdl);
  LOOM_ARG_CHECK(t == DType::F32, "sample_tokens: logits in ", dtype_name(t),
                 " (expected f32 or bf16)");
  return sample_tokens_t(static_cast<const float*>(logits), n_rows, vocab, ld, params, workspace,
                         tokens, stream, pdl);
}

}  // namespace loom::gpu
