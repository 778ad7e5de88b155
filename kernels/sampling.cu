#include <cuda_bf16.h>

#include <climits>
#include <type_traits>

#include "core/philox.h"
#include "kernels/common.cuh"
#include "kernels/sample_top_p.cuh"
#include "kernels/sampling.cuh"

namespace loom::gpu {

constexpr int kDrawThreads = 256;
constexpr size_t kDrawMaxSmem = 160 * 1024;  // v̂ of one chunk: vocab up to 1,310,720

struct SamplePartial {
  float v;
  int32_t i;
};

// The kept set (*thr, *cut) of a row that sampled_top_k and top_p_by_values did not take, by the
// quanta (top-p alone) or the selects over the row, and top-p's draw (*drawn). Inlined, as
// top_p_by_values is: with either left a call, the sampled top-k's path lost ~8 us at 256 rows
// (H200, session 24).
template <class T>
__device__ __forceinline__ void filter_by_selects(const T* lg, int vocab, const SampleParamsDev& p,
                                                  bool top_k_on, bool top_p_on, Mass* scratch,
                                                  BinSmem& sm, uint32_t* thr, int* cut,
                                                  int* drawn) {
  __shared__ float fscratch[32];
  const float t = p.temperature;
  // Top-p's weights are relative to zmax, the largest logit / t (the quotient is monotone in
  // the logit, so one division a row; fmaxf passes over NaN either way).
  float xmax = -INFINITY, zmax = -INFINITY;  // the largest logit, and its z
  if (top_p_on) {
    for_each_logit(lg, vocab, sm.ring, [&](int i, float x) {
      if (i < vocab) xmax = fmaxf(xmax, x);
    });
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    xmax = warp_max(xmax);
    if (lane == 0) fscratch[warp] = xmax;
    __syncthreads();
    xmax = warp_max(lane < int(blockDim.x >> 5) ? fscratch[lane] : -INFINITY);
    zmax = xmax / t;
  }
  // (fp32 only: a bf16 row top_p_by_values leaves has a logit that is not finite, or values
  // whose z collide, which the quanta would leave too.)
  if constexpr (std::is_same<T, float>::value)
    if (top_p_on && !top_k_on &&
        top_p_by_quanta(lg, vocab, p, xmax, zmax, scratch, sm, thr, cut, drawn))
      return;
  const SelectWeight count{false, zmax, sm.top_p_tables};
  const Mass k = Mass(p.top_k);
  if (top_k_on &&
      !bin_select(lg, vocab, t, count, 0u, INT_MAX, k, MassTarget{}, thr, cut, scratch, sm))
    radix_select(lg, vocab, t, count, 0u, INT_MAX, k, thr, cut, scratch, sm);
  if (top_p_on) {
    // The cut, then draw stream 4's token: the same selects over the kept set, with the draw
    // point of its mass for target (one copy of the selects, their rules in shared memory so
    // that they hold no registers in the passes). Every weight 0: the kept set and the draw
    // are the first.
    __shared__ MassTarget rules[2];
    if (threadIdx.x == 0) rules[0] = MassTarget{p.top_p}, rules[1] = MassTarget::of_draw(p);
    __syncthreads();
    const SelectWeight mass{true, zmax, sm.top_p_tables};
    for (int pass = 0; pass < 2 && *drawn < 0; pass++) {
      uint32_t thr2;
      int cut2;
      const bool some =  // (the kept set's mass is never 0)
          mass_select(lg, vocab, t, mass, *thr, *cut, rules[pass], &thr2, &cut2, scratch, sm,
                      pass == 0 ? &rules[1] : nullptr, drawn);
      if (pass == 0) *thr = thr2, *cut = cut2;
      if (!some) {
        *drawn = first_id_at(lg, vocab, t, *thr, *cut);
        break;
      }
      if (pass == 1) *drawn = cut2;
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kFilterThreads)
    sample_filter_kernel(const T* logits, int vocab, int ld, const SampleParamsDev* params,
                         SampleFilter* filters, int32_t* lists) {
  __shared__ Mass scratch[32];
  extern __shared__ __align__(16) unsigned char filter_smem[];
  BinSmem& sm = *reinterpret_cast<BinSmem*>(filter_smem);
  pdl_trigger();
  pdl_wait();  // the logits come from the kernel before (see sample_tokens' pdl)
  const int row = blockIdx.x;
  const SampleParamsDev p = params[row];
  const bool top_k_on = p.top_k > 0 && p.top_k < vocab;
  const bool top_p_on = p.top_p < 1.0f;
  if (!p.active || p.temperature <= 0.0f || (!top_k_on && !top_p_on)) {
    if (threadIdx.x == 0) filters[row] = SampleFilter{0u, INT_MAX, 0, -1};
    return;
  }
  if (top_p_on)  // (read after the selects' first barrier)
    for (int j = threadIdx.x; j < 128; j += blockDim.x) sm.top_p_tables[j] = kTopPTablesDev[j];
  const T* lg = logits + size_t(row) * ld;
  const float t = p.temperature;
  uint32_t thr = 0u;
  int cut = INT_MAX, drawn = -1;
  if (top_k_on && p.top_k <= kSampledTopK && vocab >= 16 * kSampleKeys &&
      sampled_top_k(lg, vocab, t, p.top_k, &thr, &cut, scratch, sm)) {
    const int kept = top_p_on ? top_p_of_sorted(sm, p.top_k, p.top_p, MassTarget::of_draw(p),
                                                scratch, &thr, &cut, &drawn)
                              : p.top_k;
    for (int j = threadIdx.x; j < kept; j += blockDim.x)  // the draw reads these, not the row
      lists[size_t(row) * kSampleList + j] = cand_id(sm.cand[j]);
    if (threadIdx.x == 0) filters[row] = SampleFilter{thr, cut, kept, drawn};
    return;
  }
  if constexpr (sizeof(T) == 2) {
    if (!top_k_on && top_p_by_values(lg, vocab, p, scratch, sm, &thr, &cut, &drawn)) {
      if (threadIdx.x == 0) filters[row] = SampleFilter{thr, cut, 0, drawn};
      return;
    }
  }
  filter_by_selects(lg, vocab, p, top_k_on, top_p_on, scratch, sm, &thr, &cut, &drawn);
  if (threadIdx.x == 0) filters[row] = SampleFilter{thr, cut, 0, drawn};
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
template <class T>
__device__ __forceinline__ void load4(const T* lg, int i, int end, bool aligned, float (&x)[4]) {
  if (aligned && i + 3 < end) {
    uint32_t w[4];
    if constexpr (sizeof(T) == 4) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(lg + i));
      w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
    } else {
      const uint2 q = __ldg(reinterpret_cast<const uint2*>(lg + i));
      w[0] = q.x, w[1] = q.y;
    }
#pragma unroll
    for (int j = 0; j < 4; j++) x[j] = word_logit<T>(w, j);
  } else {
#pragma unroll
    for (int j = 0; j < 4; j++) x[j] = i + j < end ? logit_at(lg, i + j) : 0.0f;
  }
}

// A row's groups of 4 logits (one Philox call's): draw block c takes groups [c per, (c + 1) per),
// per = groups / kSampleChunks, and the last block also the remainder (Terra: 31 blocks of
// 2,048 groups, one of 2,049). draw_max_groups is the largest block's count. 32 chunks a row, not
// 64: half the blocks, each with twice the groups a thread, cost less in every mode (fewer
// per-block reductions and partials, and half the blocks that leave at once after a filter that
// drew the row): at 256 rows on an H200, greedy 101 -> 85 us (f32) and 122 -> 103 (bf16),
// temperature 195 -> 172 and 220 -> 194, fp32 top-p 272 -> 262; 16 chunks took bf16's
// temperature back to 203 (64 KB of v̂ a block: 3 blocks an SM) (session 47).
__host__ __device__ constexpr int draw_groups(int vocab) {
  return (vocab + 3) / 4;
}
__host__ __device__ constexpr int draw_max_groups(int vocab) {
  return draw_groups(vocab) - (kSampleChunks - 1) * (draw_groups(vocab) / kSampleChunks);
}
// (the largest block's groups only grow with the vocabulary, so the limit is one number)
static_assert(draw_max_groups(kSampleMaxVocab) * sizeof(float4) == kDrawMaxSmem &&
                  draw_max_groups(kSampleMaxVocab + 1) * sizeof(float4) > kDrawMaxSmem,
              "kSampleMaxVocab is the device draw's limit");

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
  // A row the filter drew itself (top-p, draw stream 4) has nothing left to draw: its blocks
  // leave before reading the row's parameters, and sample_final takes the filter's token.
  const SampleFilter f = filters[row];  // (the filter writes every row)
  if (f.drawn >= 0) return;
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
  } else if (p.active && f.listed > 0) {
    // The filter listed the kept ids (at most kSampleList): block 0 draws them with the exact
    // noise, the other blocks of the row have nothing to do.
    const int n = f.listed;
    for (int j = threadIdx.x; chunk == 0 && j < n; j += blockDim.x) {
      const int i = lists[size_t(row) * kSampleList + j];
      const float u = philox_uniform(p.seed, p.sample_index, p.draw_index, uint32_t(i));
      const float v = logit_at(lg, i) / p.temperature + gumbel_noise(u);
      if (better(v, i, bv, bi)) bv = v, bi = i;
    }
  } else if (p.active) {
    const float t = p.temperature, inv_t = 1.0f / t;
    const bool filtered = f.thr != 0u || f.id_cut != INT_MAX;  // top-k / top-p on this row
    if (threadIdx.x == 0) irregular = 0;
    __syncthreads();
    float m = -INFINITY;
    float odd = 0.0f;  // NaN once a kept v̂ is infinite or NaN: fma(v̂, 0, odd), one op a logit
    // The seed's round keys, once: hidden from ptxas (an empty asm), which otherwise re-adds
    // them in every round of every group under the loop's register pressure (~18 VIADD a Philox,
    // ~4.5 instructions a logit); held so, they live in uniform registers as LOP3 operands.
    PhiloxKeys keys = philox_seed_keys(p.seed);
#pragma unroll
    for (int r = 0; r < 10; r++) asm volatile("" : "+r"(keys.k0[r]), "+r"(keys.k1[r]));
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
          const Philox4 r = philox_group(keys, p.sample_index, p.draw_index, uint32_t(g));
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

__global__ void sample_final_kernel(const SampleParamsDev* params, const SampleFilter* filters,
                                    const SamplePartial* partials, int32_t* tokens) {
  pdl_wait();
  const int row = blockIdx.x;
  const int lane = threadIdx.x;
  // The filter's token (the draw kernel wrote nothing); the filter draws active rows only.
  const int drawn = filters[row].drawn;
  if (drawn >= 0) {
    if (lane == 0) tokens[row] = drawn;
    return;
  }
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
  LOOM_ARG_CHECK(vocab <= kSampleMaxVocab, "sample_tokens: vocab ", vocab,
                 " is above the device draw's limit of ", kSampleMaxVocab);
  const size_t vhat_bytes = size_t(draw_max_groups(vocab)) * sizeof(float4);
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
                    static_cast<const SampleFilter*>(filters),
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
