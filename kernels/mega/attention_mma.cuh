// AttnPartial's two products on the tensor cores in bf16 (attention_ops.cuh calls them, at 2
// slots as calls; mega_step checks attn_mma_fits): what differs from the
// CUDA-core scores and P·V (batch 1 -3.1%, batch 8 -3.5% on an H100). At batch 8 those took ~8.5 µs
// from staged K/V to written partials for a 256-key partition whose shared memory traffic is ~2.5
// µs (bench/NOTES-cuda.md, session 60): thread-serial FMA chains of 64 and of K / 4, one
// warp-instruction per product.
//
// Geometry (G ≤ 16 query heads of the KV group as the mma's rows, the heads past G clamped to
// head G − 1 and discarded; head_dim hd a multiple of 16, ≤ 128):
//   Scores S[G, K] = q · kᵀ: n-tile j (keys 8j … 8j + 7) on warp j mod 16, the k-steps of hd in
//     increasing order, A = q (bf16: q was rounded to bf16 by Qkv, so exact), B = k rows by
//     ldmatrix (rows hd + 8 elements apart at 4-8 slots, swizzled at 1 (kv_chunk): the 8 row
//     addresses on 8 bank groups; v's .trans rows at 1 slot on 4, two each).
//   P in bf16 over the scores in place: row h's 16-byte granule u at u ^ (h mod 8) of the row's
//     first half (mega_p_granule), so an ldmatrix of 8 heads meets no bank twice. The softmax
//     writes it in its exp pass, each lane's granule within the fp32 elements its warp has read.
//   O[G, hd] = P · V: warp w takes the 8 dims 8 (w mod (hd / 8)) and the keys of key group
//     w / (hd / 8) (kgs keys, a multiple of 16, in increasing k-steps), V by ldmatrix .trans;
//     the groups' fp32 D land in shared memory (over k, dead since the scores) and thread (h, e)
//     sums them in group order.
// Bits: fp32 accumulation in the mma's order (not the CUDA-core path's); the max and Σ p are
// the fp32 scores' and probabilities' as there, P·V reads p rounded to bf16.
#pragma once

#include "kernels/common.cuh"
#include "kernels/mega/sync.cuh"

namespace loom::mega {

using loom::gpu::bf16;

// Whether AttnPartial of a group of G heads of head_dim hd can run on the tensor cores in bf16
// (then the key groups' sums, at most 128 · G floats, fit over k's 256 rows: hd + 8 elements
// each at 4-8 slots, hd at 1-2).
__host__ __device__ inline bool attn_mma_fits(int G, int hd) {
  return G <= 16 && hd % 16 == 0 && hd <= 128;
}

__device__ __forceinline__ void attn_ldsm_x2(uint32_t& r0, uint32_t& r1, uint32_t s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r0), "=r"(r1)
               : "r"(s)
               : "memory");
}
__device__ __forceinline__ void attn_ldsm_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                             uint32_t s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(s)
               : "memory");
}
__device__ __forceinline__ void attn_ldsm_x2_trans(uint32_t& r0, uint32_t& r1, uint32_t s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r0), "=r"(r1)
               : "r"(s)
               : "memory");
}

// Where chunk c (16 bytes) of k or v row `key` is kept in shared memory at 1-2 slots (kSwz;
// at 4-8 the swizzle's index arithmetic spills), for rows of a multiple of 8 chunks (others:
// in place): k rows at c ^ (key mod 8), so the scores' 32 lanes (32 neighbouring keys, the same
// chunk) spread over all banks; v rows at c ^ 2 (key mod 4), so P·V's four lanes of a group (the
// same dims of four neighbouring keys) hit both bank halves.
template <bool kSwz>
__device__ __forceinline__ int kv_chunk(bool v, int key, int c, int vecs) {
  if (!kSwz || vecs % 8 != 0) return c;
  return c ^ (v ? (key & 3) << 1 : key & 7);
}

// q's row h at columns c, c + 1 as a bf16 pair (one 32-bit load: Qkv rounded q to bf16); rows
// ≥ G zero.
__device__ __forceinline__ uint32_t attn_q_pair(const bf16* q, int hd, int G, int h, int c) {
  return h < G ? *reinterpret_cast<const uint32_t*>(q + h * hd + c) : 0u;
}

// n-tile j's scores (keys 8j … 8j + 7, k-steps of hd in order) added to the mma accumulators d:
// q's rows g (d[0], d[1]) and, with kHi, g + 8 (d[2], d[3]; without, rows 8-15 are zero).
// k_lane: this lane's k row (lane mod 8) of key 0, rows of ld elements (kSwz: kv_chunk's
// swizzle); ldmatrix x2 rows: lanes 0-7 keys 8j + r at dims c … c + 7, lanes 8-15 at c + 8.
template <bool kSwz, bool kHi>
__device__ __forceinline__ void attn_score_tile(float (&d)[4], uint32_t k_lane, int j,
                                                const bf16* q, int G, int hd, int ld) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int vecs = hd / 8, hi = (lane >> 3) & 1;
  for (int c = 0; c < hd; c += 16) {
    uint32_t b0, b1;
    attn_ldsm_x2(
        b0, b1,
        k_lane + uint32_t(j * 8 * ld * 2 + 16 * kv_chunk<kSwz>(false, lane & 7, c / 8 + hi, vecs)));
    loom::gpu::mma_bf16(d, attn_q_pair(q, hd, G, g, c + 2 * t),
                        kHi ? attn_q_pair(q, hd, G, g + 8, c + 2 * t) : 0u,
                        attn_q_pair(q, hd, G, g, c + 2 * t + 8),
                        kHi ? attn_q_pair(q, hd, G, g + 8, c + 2 * t + 8) : 0u, b0, b1);
  }
}

// Scores of keys [0, K) into s [G, ks_stride] (fp32, times scale; keys ≥ nk −inf). q [G, hd]
// bf16, k [K, ld] bf16 (kSwz: chunks swizzled, kv_chunk). Ends without a barrier.
template <bool kSwz>
__device__ __forceinline__ void attn_mma_scores_body(const bf16* q, const bf16* k, float* s,
                                                     int ks_stride, int G, int hd, int ld, int K,
                                                     int nk, float scale) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint32_t k_lane = loom::gpu::smem_u32(k + (lane & 7) * ld);
  for (int j = threadIdx.x >> 5; j * 8 < K; j += kMegaWarps) {  // n-tile j: keys 8j … 8j + 7
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    attn_score_tile<kSwz, true>(d, k_lane, j, q, G, hd, ld);
    const int key = j * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; half++)
      if (g + 8 * half < G)
        *reinterpret_cast<float2*>(s + (g + 8 * half) * ks_stride + key) =
            make_float2(key < nk ? d[2 * half] * scale : -INFINITY,
                        key + 1 < nk ? d[2 * half + 1] * scale : -INFINITY);
  }
}

// O = P · V into part rows h < G (acc[hd], then m, l as the CUDA-core path leaves them).
// s: the scores' rows (ks_stride fp32 each) holding P in bf16 (mega_p_granule), then m [G] and
// l [G] (AttnSmem); v [K, ld] (kSwz: chunks swizzled, kv_chunk); sums: 128 · G floats of dead
// shared memory. Barrier inside; ends without one.
template <bool kSwz>
__device__ __forceinline__ void attn_mma_pv_body(const float* s, int ks_stride, const bf16* v,
                                                 float* sums, float* part, int G, int hd, int ld,
                                                 int K) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ndt = hd / 8, nkq = kMegaWarps / ndt;  // n-tiles of 8 dims; key groups
  const int kgs = ((K + nkq - 1) / nkq + 15) / 16 * 16, groups = (K + kgs - 1) / kgs;
  const int dt = warp % ndt, kq = warp / ndt;
  if (kq < groups) {
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // ldmatrix rows, lanes 0-7 and 8-15: P's heads r (past G: head G − 1, rows discarded) at
    // keys + 0 and + 8 (G > 8, x4: lanes 16-31 heads r + 8); V's keys r and r + 8 at dims 8 dt.
    const int mi = lane >> 3, r = lane & 7;
    const int ph = min(G > 8 ? r + 8 * (mi >> 1) : r, G - 1), pk = 8 * (mi & 1);
    const uint32_t p_row = loom::gpu::smem_u32(s + ph * ks_stride);
    // (v's swizzle depends on the key mod 4 = r mod 4: the same for every k-step.)
    const uint32_t v_lane =
        loom::gpu::smem_u32(v + (r + 8 * (mi & 1)) * ld + 8 * kv_chunk<kSwz>(true, r, dt, hd / 8));
    const int k_end = min(K, (kq + 1) * kgs);
    for (int key0 = kq * kgs; key0 < k_end; key0 += 16) {
      uint32_t a[4], b0, b1;
      const uint32_t pa = p_row + mega_p_granule(ph, key0 + pk);
      if (G > 8) {  // matrices (heads, keys), (heads, keys + 8), (heads + 8, keys), (…, + 8)
        attn_ldsm_x4(a[0], a[2], a[1], a[3], pa);
      } else {
        attn_ldsm_x2(a[0], a[2], pa);
        a[1] = a[3] = 0u;
      }
      attn_ldsm_x2_trans(b0, b1, v_lane + uint32_t(key0 * ld * 2));
      loom::gpu::mma_bf16(d, a, b0, b1);
    }
    // Rows g, g + 8 (g = lane / 4); dims 8 dt + 2 (lane mod 4).
    const int g = lane >> 2;
#pragma unroll
    for (int half = 0; half < 2; half++)
      if (g + 8 * half < G)
        *reinterpret_cast<float2*>(sums + (kq * G + g + 8 * half) * hd + 8 * dt + 2 * (lane & 3)) =
            make_float2(d[2 * half], d[2 * half + 1]);
  }
  __syncthreads();
  const float* m = s + G * ks_stride;  // then l = m + G
  for (int o = tid; o < G * hd; o += kMegaThreads) {
    const int h = o / hd, e = o - h * hd;
    float acc = 0.0f;
    for (int q = 0; q < groups; q++) acc += sums[(q * G + h) * hd + e];
    float* row = part + size_t(h) * (hd + 2);
    row[e] = acc;
    if (e == 0) row[hd] = m[h], row[hd + 1] = m[G + h];
  }
}

// The two products as AttnPartial calls them: inlined, but as calls where kCall (at 2 slots,
// where ptxas spilled 44 bytes with them inlined; as calls batch 1 took 0.9% longer, so only
// there: bench/NOTES-cuda.md session 62).
template <bool kSwz>
__device__ __noinline__ void attn_mma_scores_call(const bf16* q, const bf16* k, float* s,
                                                  int ks_stride, int G, int hd, int ld, int K,
                                                  int nk, float scale) {
  attn_mma_scores_body<kSwz>(q, k, s, ks_stride, G, hd, ld, K, nk, scale);
}
template <bool kSwz>
__device__ __noinline__ void attn_mma_pv_call(const float* s, int ks_stride, const bf16* v,
                                              float* sums, float* part, int G, int hd, int ld,
                                              int K) {
  attn_mma_pv_body<kSwz>(s, ks_stride, v, sums, part, G, hd, ld, K);
}
template <bool kSwz, bool kCall>
__device__ __forceinline__ void attn_mma_scores(const bf16* q, const bf16* k, float* s,
                                                int ks_stride, int G, int hd, int ld, int K, int nk,
                                                float scale) {
  if constexpr (kCall)
    attn_mma_scores_call<kSwz>(q, k, s, ks_stride, G, hd, ld, K, nk, scale);
  else
    attn_mma_scores_body<kSwz>(q, k, s, ks_stride, G, hd, ld, K, nk, scale);
}
template <bool kSwz, bool kCall>
__device__ __forceinline__ void attn_mma_pv(const float* s, int ks_stride, const bf16* v,
                                            float* sums, float* part, int G, int hd, int ld,
                                            int K) {
  if constexpr (kCall)
    attn_mma_pv_call<kSwz>(s, ks_stride, v, sums, part, G, hd, ld, K);
  else
    attn_mma_pv_body<kSwz>(s, ks_stride, v, sums, part, G, hd, ld, K);
}

}  // namespace loom::mega
