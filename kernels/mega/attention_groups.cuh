// AttnPartial at 4-8 slots with the tensor-core GEMVs (bf16, head_dim 64 or 128, G ≤ 8): the
// CTA's 16 warps as kAttnGroups independent groups of 4, each walking its own chain of 64-key
// partitions, so that four partitions' round trips and barriers overlap on an SM instead of
// one 256-key partition's running alone. A batch-8 partition of 256 keys took ~7.5 µs whatever
// its instruction count (bench/NOTES-cuda.md, session 64): a latency chain (stage, scores,
// softmax, P·V and the CTA barriers between) that a second buffer, fewer instructions or TMA
// boxes did not shorten.
//
// Unit u = (b · kv_heads + g) · S + j (S = attn_splits) and group w take partitions
// p = j + S·w + 4S·i, i = 0, 1, … < parts = ceil(n_keys / 64), in that order, and fold them as
// they go (online softmax: m' = max(m, max of the partition), acc and Σ p scaled by
// e^(m − m')), leaving one partial in slot j + S·w — the index of the group's first
// partition, so the slots with work are exactly 0 … min(parts, 4S) − 1, which AttnReduce folds
// in order. Bits: each slot's sums in the order above (scores and P·V on the tensor cores with
// fp32 accumulation, a partition's Σ p by lanes and the xor tree), so they depend on kv_len and
// S only, never on the SMs.
//
// A group's shared memory (AttnGroupSmem): k and v rows [64, hd] swizzled as kv_chunk's
// (16-byte piece c of row r at c ^ (r mod 8) for k, c ^ 2 (r mod 4) for v), the scores [G, 64]
// fp32 with P in bf16 over their first half (mega_p_granule), and m, Σ p and the scale factor of
// each head. q [G, hd] bf16 is the CTA's, staged once a unit.
#pragma once

#include "kernels/mega/attention_ops.cuh"

namespace loom::mega {

constexpr int kAttnGroupWarps = kMegaWarps / kAttnGroups;
constexpr int kAttnGroupThreads = 32 * kAttnGroupWarps;
static_assert(kMegaWarps % kAttnGroups == 0 && kAttnGroupWarps == 4, "four warps a group");

template <class T>
struct AttnGroupSmem {
  T* k;      // [64, hd]
  T* v;      // [64, hd]
  float* s;  // [G, 64] scores; P bf16 over each row's first half
  float* m;  // [G] running max
  float* l;  // [G] running Σ p
  float* f;  // [G] e^(m_old − m_new) of the partition just softmaxed
  __device__ AttnGroupSmem(void* base, int w, int G, int hd) {
    char* p = static_cast<char*>(base) + size_t(w) * attn_group_bytes(G, hd);
    k = reinterpret_cast<T*>(p);
    v = k + kAttnGroupKeys * hd;
    s = reinterpret_cast<float*>(v + kAttnGroupKeys * hd);
    m = s + G * kAttnGroupKeys;
    l = m + G;
    f = l + G;
  }
  __host__ __device__ static size_t attn_group_bytes(int G, int hd) {
    return 2 * size_t(kAttnGroupKeys) * hd * sizeof(T) +
           size_t((G * kAttnGroupKeys + 3 * G + 3) / 4 * 4) * 4;
  }
};

// Shared memory of the group path: q [G, hd] bf16 (16-byte aligned), then the groups'.
__host__ __device__ inline size_t attn_groups_smem_bytes(int G, int hd) {
  return size_t(G) * hd * 2 + kAttnGroups * AttnGroupSmem<bf16>::attn_group_bytes(G, hd);
}

// Group w's barrier: named barrier 3 + w (gemv_mma.cuh's are 1 and 2).
__device__ __forceinline__ void group_sync(int w) {
  asm volatile("bar.sync %0, %1;" ::"r"(3 + w), "r"(kAttnGroupThreads) : "memory");
}

// Group thread t's cp.async of the k and v rows of keys [key0, key0 + nk) of slot b's KV head
// g into the group's buffers (rows past nk zero; the key `skip`, relative, left alone).
__device__ __forceinline__ void group_stage(const MegaArgs& a, const bf16* k_cache,
                                            const bf16* v_cache, int b, int g, int key0, int nk,
                                            int skip, const AttnGroupSmem<bf16>& sm, int t) {
  const int hd = a.d.head_dim, vecs = hd / 8;
  stage_kv_async<kAttnGroupThreads>(
      a, k_cache, v_cache, b, g, kAttnGroupKeys, key0, nk, t,
      [&](bool v, int key, int c) {
        return reinterpret_cast<uint4*>((v ? sm.v : sm.k) + key * hd) +
               kv_chunk<true>(v, key, c, vecs);
      },
      [skip](int key) { return key != skip; });
}

// One 64-key partition of a group, its k and v staged: scores, the online softmax, and P·V into
// acc (warp kw's 8-dim tiles kw, kw + 4, …; rows g and g + 8 of the mma, g < G kept).
__device__ __forceinline__ void group_partition(const MegaArgs& a, const bf16* q,
                                                const AttnGroupSmem<bf16>& sm, int w, int nk,
                                                float (&acc)[4][2]) {
  const int G = a.d.group_size(), hd = a.d.head_dim, vecs = hd / 8;
  const int lane = threadIdx.x & 31, kw = (threadIdx.x >> 5) % kAttnGroupWarps;
  const int g = lane >> 2, t = lane & 3;
  // Scores: n-tiles kw and kw + 4 (keys 8 n … 8 n + 7), k-steps of hd in order.
  const uint32_t k_lane = loom::gpu::smem_u32(sm.k + (lane & 7) * hd);
#pragma unroll 1
  for (int n = kw; n < kAttnGroupKeys / 8; n += kAttnGroupWarps) {
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    attn_score_tile<true, false>(d, k_lane, n, q, G, hd, hd);
    const int key = n * 8 + 2 * t;
    if (g < G)
      *reinterpret_cast<float2*>(sm.s + g * kAttnGroupKeys + key) =
          make_float2(key < nk ? d[0] * a.attn_scale : -INFINITY,
                      key + 1 < nk ? d[1] * a.attn_scale : -INFINITY);
  }
  group_sync(w);
  // The online softmax: warp kw, heads kw and kw + 4; lane l keys l and l + 32.
  for (int h = kw; h < G; h += kAttnGroupWarps) {
    float* row = sm.s + h * kAttnGroupKeys;
    const float s0 = row[lane], s1 = row[lane + 32];
    const float m_old = sm.m[h], m_new = fmaxf(m_old, loom::gpu::warp_max(fmaxf(s0, s1)));
    const float e0 = lane < nk ? expf(s0 - m_new) : 0.0f;
    const float e1 = lane + 32 < nk ? expf(s1 - m_new) : 0.0f;
    const float sum = loom::gpu::warp_sum(e0 + e1);
    char* p = reinterpret_cast<char*>(row);  // (each lane's granules within what it read)
    *reinterpret_cast<bf16*>(p + mega_p_granule(h, lane)) = __float2bfloat16(e0);
    *reinterpret_cast<bf16*>(p + mega_p_granule(h, lane + 32)) = __float2bfloat16(e1);
    if (lane == 0) {
      const float f = expf(m_old - m_new);  // (0 at the first partition: m_old is −inf)
      sm.f[h] = f;
      sm.l[h] = sm.l[h] * f + sum;
      sm.m[h] = m_new;
    }
  }
  group_sync(w);
  // P · V: A = P (heads r, keys + 0 / + 8: ldmatrix x2; rows 8-15 zero), B = v by .trans.
  const int mi = lane >> 3, r = lane & 7;
  const int ph = min(r, G - 1), pk = 8 * (mi & 1);
  const uint32_t p_row = loom::gpu::smem_u32(sm.s + ph * kAttnGroupKeys);
  const float f = g < G ? sm.f[g] : 0.0f;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int dt = kw + kAttnGroupWarps * i;
    if (dt * 8 >= hd) break;
    acc[i][0] *= f, acc[i][1] *= f;
    const uint32_t v_lane =
        loom::gpu::smem_u32(sm.v + (r + 8 * (mi & 1)) * hd + 8 * kv_chunk<true>(true, r, dt, vecs));
#pragma unroll 1
    for (int key0 = 0; key0 < kAttnGroupKeys; key0 += 16) {
      uint32_t a0, a2, b0, b1;
      attn_ldsm_x2(a0, a2, p_row + mega_p_granule(ph, key0 + pk));
      attn_ldsm_x2_trans(b0, b1, v_lane + uint32_t(key0 * hd * 2));
      float d[4] = {acc[i][0], acc[i][1], 0.0f, 0.0f};
      loom::gpu::mma_bf16(d, a0, 0u, a2, 0u, b0, b1);
      acc[i][0] = d[0], acc[i][1] = d[1];
    }
  }
}

// AttnPartial units [begin, end) on the group path (contract: instructions.h; the layout
// above). The keys cached before this step depend on no counter: each group stages its first
// partition before the wait on the KV head's Qkv tiles, all but the new key, which the group
// holding it copies after the wait with q.
template <class T>
__device__ bool run_attn_groups(const MegaArgs& a, const MegaCtx& c, int layer, uint32_t begin,
                                uint32_t end, void* smem, MegaShared& sh) {
  static_assert(sizeof(T) == 2, "the group path is bf16");
  const MegaDims& d = a.d;
  const int G = d.group_size(), hd = d.head_dim, S = d.attn_splits, vecs = hd / 8;
  const int tid = threadIdx.x, w = tid / kAttnGroupThreads, t = tid % kAttnGroupThreads;
  const bf16* k_cache = static_cast<const bf16*>(a.layers[layer].k_cache);
  const bf16* v_cache = static_cast<const bf16*>(a.layers[layer].v_cache);
  bf16* q = static_cast<bf16*>(smem);
  const AttnGroupSmem<bf16> sm(static_cast<char*>(smem) + size_t(G) * hd * 2, w, G, hd);
  for (uint32_t u = begin; u < end; u++) {
    const int bg = int(u) / S, j = int(u) % S;
    const int b = bg / d.kv_heads, g = bg % d.kv_heads;
    const int n_keys = a.kv_len[b] + 1;  // the last, n_keys − 1, is written this step
    const int parts = mega_ceil_div(n_keys, attn_partition_keys<true>(a, n_keys, S));
    if (j >= parts) continue;  // (split 0 publishes for the idle splits, as run_attn_partial)
    const uint32_t arrivals = j == 0 ? 1 + uint32_t(S - min(S, parts)) : 1;
    const int p0 = j + S * w;  // the group's first partition (and its slot)
    const int fresh0 = n_keys - 1 - p0 * kAttnGroupKeys;
    if (t < G) sm.m[t] = -INFINITY, sm.l[t] = 0.0f;
    if (p0 < parts)
      group_stage(a, k_cache, v_cache, b, g, p0 * kAttnGroupKeys,
                  min(kAttnGroupKeys, n_keys - p0 * kAttnGroupKeys), fresh0, sm, t);
    if (!cta_wait(c, mega_wait(d, MegaOp::AttnPartial, layer, int(u)))) {
      loom::gpu::cp_async_wait<0>();  // (no copy lands after the CTA left)
      return false;
    }
    // q (chunks of 8 elements) by the CTA; the new key's k and v rows by its group.
    const uint4* qs = reinterpret_cast<const uint4*>(static_cast<const bf16*>(a.qkv) +
                                                     size_t(b) * d.qkv_rows() + size_t(g) * G * hd);
    for (int i = tid; i < G * hd / 8; i += kMegaThreads)
      reinterpret_cast<uint4*>(q)[i] = __ldcg(qs + i);
    if (p0 < parts && fresh0 < kAttnGroupKeys && t < 2 * vecs) {
      const bool v = t < vecs;
      reinterpret_cast<uint4*>((v ? sm.v : sm.k) +
                               fresh0 * hd)[kv_chunk<true>(v, fresh0, t % vecs, vecs)] =
          __ldcg(kv_row(a, v ? v_cache : k_cache, b, g, n_keys - 1) + t % vecs);
    }
    __syncthreads();  // q, every group's m and l
    float acc[4][2] = {};
    for (int p = p0; p < parts; p += kAttnGroups * S) {
      const int key0 = p * kAttnGroupKeys, nk = min(kAttnGroupKeys, n_keys - key0);
      if (p != p0) {
        group_sync(w);  // the partition before read its rows
        group_stage(a, k_cache, v_cache, b, g, key0, nk, -1, sm, t);
      }
      loom::gpu::cp_async_wait<0>();
      group_sync(w);
      group_partition(a, q, sm, w, nk, acc);
    }
    if (p0 < parts) {  // slot p0: acc rows g < G (dims of this warp's tiles), then m and Σ p
      const int lane = tid & 31, kw = (tid >> 5) % kAttnGroupWarps, gr = lane >> 2;
      float* part = a.attn_part + (size_t(bg) * a.max_parts + p0) * mega_partial_floats(G, hd);
      if (gr < G)
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const int dt = kw + kAttnGroupWarps * i;
          if (dt * 8 >= hd) break;
          *reinterpret_cast<float2*>(part + gr * (hd + 2) + dt * 8 + 2 * (lane & 3)) =
              make_float2(acc[i][0], acc[i][1]);
        }
      if (t < G) part[t * (hd + 2) + hd] = sm.m[t], part[t * (hd + 2) + hd + 1] = sm.l[t];
    }
    // The split completing (b, g) folds the slots at once (AttnReduce, no hop).
    attn_fence_ring(a);
    if (cta_publish_last(c, mega_publish(d, MegaOp::AttnPartial, layer, int(u)),
                         mega_group_units(d, MegaOp::AttnPartial), &sh.last, arrivals)) {
      attn_reduce_unit<T>(a, bg, smem, int(attn_smem_bytes<T>(G, hd, true) / 4),
                          min(parts, kAttnGroups * S));
      attn_fence_ring(a);
      cta_publish(c, mega_publish(d, MegaOp::AttnReduce, layer, bg));
    }
  }
  return true;
}

}  // namespace loom::mega
