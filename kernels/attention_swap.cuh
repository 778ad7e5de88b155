// The decode tile with the mma operands swapped (G <= 8 query heads a kv head; the TMA decode
// kernel's default, config 0, for both cache dtypes). tile_partial(_f8) takes the G heads as the
// mma's M rows 0..7 and leaves rows 8..15 empty: half of every mma, and of the s / acc registers,
// is padding. Here
//   S^T = K Q^T   (M = 16 keys, N = 8 heads, K = 16 dims)
//   O^T = V^T P^T (M = 16 dims, N = 8 heads, K = 16 keys)
// use every row: 16 + 16 mma a 64-key tile instead of 32 + 32, 16 + 16 accumulators instead of
// 32 + 32. The bits are tile_partial(_f8)'s: an mma output element does not depend on which
// operand is A (tests/cuda/test_mma_swap.cu's probe: 0 of 12.8 M elements differ), the K and V
// fragments hold the same values (bf16, or the same conversions of e4m3 bytes) in the same k order,
// P^T is the same 16-bit values moved by movmatrix.trans, and l follows the canonical tree8 order.
// Included by attention_tma.cu only.
#pragma once

#include "kernels/attention_mma.cuh"

namespace loom::gpu::mma_impl {

// Energy probes of the e4m3 tile (LOOM_TMA_PROBE, 0 in every normal build; a probe build sets it
// on attention_tma.cu's compile line, bench/experiments/2026-12-03-session42-call-energy-
// probes.sh and bench/NOTES-cuda.md's session 41): 1, no tile math (the copies, barriers and merges
// only); 2, no e4m3 conversions (the raw bytes as f16 pairs); 3, no MMAs (a xor of their operands
// instead, which keeps the conversions). The outputs are garbage; the joules a replay say where
// attention's energy goes.
#ifndef LOOM_TMA_PROBE
#define LOOM_TMA_PROBE 0
#endif
__device__ __forceinline__ void probe_e4m3x4_to_f16x2x2(uint32_t four, uint32_t& lo, uint32_t& hi) {
#if LOOM_TMA_PROBE == 2
  lo = four & 0xffffu, hi = four >> 16;
#else
  e4m3x4_to_f16x2x2(four, lo, hi);
#endif
}
__device__ __forceinline__ void probe_mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                              uint32_t b1) {
#if LOOM_TMA_PROBE == 3
  c[0] = __uint_as_float(__float_as_uint(c[0]) ^ a[0] ^ a[1] ^ a[2] ^ a[3] ^ b0 ^ b1);
#else
  mma_f16(c, a, b0, b1);
#endif
}

// (m, l, acc) of a lane's two heads 2 tig + c (c = 0, 1) over its dims: acc[db][2 half + c] is
// dim col_dim<F8>(db, g, half) of head 2 tig + c.
template <int D>
struct ColState {
  float m[2], l[2];
  float acc[D / 16][4];
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int c = 0; c < 2; c++) m[c] = -INFINITY, l[c] = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 16; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][e] = 0.0f;
  }
};

// s = merge(s, t) for head c of the lane's pair (merge_row's arithmetic).
template <int D>
__device__ __forceinline__ void merge_col(ColState<D>& s, const ColState<D>& t, int c) {
  const MergeWeights w = merge_weights(s.m[c], t.m[c]);
  s.l[c] = merge_value(s.l[c], t.l[c], w);
#pragma unroll
  for (int i = 0; i < D / 16; i++)
#pragma unroll
    for (int half = 0; half < 2; half++)
      s.acc[i][2 * half + c] = merge_value(s.acc[i][2 * half + c], t.acc[i][2 * half + c], w);
  s.m[c] = w.m;
}

// The dim of acc[db][2 half + c]: rows g and g + 8 of dim block db's m-tile. bf16: dims g and
// g + 8 of the block; e4m3: its even dim 2 g and odd dim 2 g + 1 (the V fragments' byte
// permutes take a dim pair apart).
template <bool F8>
__device__ __forceinline__ int col_dim(int db, int g, int half) {
  return F8 ? 16 * db + 2 * g + half : 16 * db + 8 * half + g;
}

__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// A lane's ldmatrix row offsets in an e4m3 tile (Swizzle64, whose swizzle takes row bits 1-2
// only): K's row (lane & 7, chunk lane >> 3), to which m-tile mt adds 1,024 mt and the high
// eight keys 512; V's keys (lane & 7) + 8 ((lane >> 3) & 1) at dim blocks 0 and 2 (chunks
// lane >> 4 and 2 + (lane >> 4)), to which key step kk adds 1,024 kk. Held in registers across
// the tile loop (the caller hides them from rematerialization).
struct F8LaneOffsets {
  int k, v0, v2;
};
template <class L>
__device__ __forceinline__ F8LaneOffsets f8_lane_offsets(int lane) {
  const int vkey = (lane & 7) + (((lane >> 3) & 1) << 3);
  return {L::off(lane & 7, lane >> 3), L::off(vkey, lane >> 4), L::off(vkey, 2 + (lane >> 4))};
}

// Calls a tile partial makes between its phases: after_k once every read of the K tile is
// done (S^T is in registers), before_v before the first read of the V tile.
struct NoTileHooks {
  __device__ __forceinline__ void after_k() {}
  __device__ __forceinline__ void before_v() {}
};
template <class A, class B>
struct TileHooks {
  A after_k;
  B before_v;
};

// The tile partial of keys [key0, key0 + 64) for the lane's heads 2 tig, 2 tig + 1 at
// positions p_c (-1: a padding head, everything masked). qa from load_q_f8, or load_q for bf16
// (rows g: head g; its a0 / a2 are Q^T's b0 / b1 for head g). scale as the tile partials'.
template <int D, class L, bool F8 = true, class Hooks = NoTileHooks>
__device__ __forceinline__ void tile_partial_swapped(const uint32_t (&qa)[D / 16][4],
                                                     const char* ks, const char* vs, int key0,
                                                     const int (&p)[2], int lane, float scale,
                                                     ColState<D>& t, const F8LaneOffsets& lo8,
                                                     Hooks hooks = {}) {
  static_assert(D == 64, "the TMA decode kernel's head_dim");
#if LOOM_TMA_PROBE == 1
  if constexpr (F8) {
    hooks.after_k();
    hooks.before_v();
    t.clear();
    return;
  }
#endif
  const int g = lane >> 2;
  // C fragments of S^T, m-tile mt: s[mt][2 half + c] = key 16 mt + 8 half + g, head 2 tig + c.
  float s[4][4];
#pragma unroll
  for (int mt = 0; mt < 4; mt++) {
#pragma unroll
    for (int e = 0; e < 4; e++) s[mt][e] = 0.0f;
  }
  // S^T = K Q^T; m-tile mt's rows g and g + 8 are keys 16 mt + g and 16 mt + 8 + g.
#pragma unroll
  for (int mt = 0; mt < 4; mt++) {
    if constexpr (F8) {
      // tile_partial_f8's ldmatrix of n-tile np (keys 8 np + 0..7) gives lane (g, t) key
      // 8 np + g's bytes 4t .. 4t + 3 of dim block k: the low pair is the A fragment's k 2t,
      // 2t + 1, the high pair k 2t + 8, 2t + 9 (the dims' permutation load_q_f8 takes too).
      uint32_t lo[4], hi[4];
      const uint32_t kb = smem_u32(ks) + lo8.k;
      ldmatrix_x4(lo, kb + 1024 * mt);  // L::off(16 mt + (lane & 7), lane >> 3)
      ldmatrix_x4(hi, kb + 1024 * mt + 512);
#pragma unroll
      for (int k = 0; k < D / 16; k++) {
        uint32_t a[4];  // lo's pairs are a0, a2; hi's a1, a3
        probe_e4m3x4_to_f16x2x2(lo[k], a[0], a[2]);
        probe_e4m3x4_to_f16x2x2(hi[k], a[1], a[3]);
        probe_mma_f16(s[mt], a, qa[k][0], qa[k][2]);
      }
    } else {
      // ldmatrix x4 of matrices (keys 0..7, dims 0..7), (keys 8..15, dims 0..7), (keys 0..7,
      // dims 8..15), (keys 8..15, dims 8..15) of the m-tile and dim block: the A fragment's
      // a0..a3 in order (lanes 8..15 address the high keys, 16..31 the high dims), so the mma
      // reads the registers ldmatrix wrote, with no moves into a quad.
      const int key = 16 * mt + (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
      for (int k = 0; k < D / 16; k++) {
        uint32_t a[4];
        ldmatrix_x4(a, ks + L::off(key, 2 * k + (lane >> 4)));
        mma_bf16(s[mt], a, qa[k][0], qa[k][2]);
      }
    }
  }
  hooks.after_k();
  // Scale, mask, max over the head's 64 keys (this lane's 8, then lanes g by xor 4, 8, 16). A
  // tile whose 64 keys every head of the lane attends to needs no mask (the same values).
  const bool whole = key0 + 63 <= min(p[0], p[1]);
  auto scale_mask = [&](auto masked) {
#pragma unroll
    for (int c = 0; c < 2; c++)
#pragma unroll
      for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
          float& x = s[mt][2 * half + c];
          x = !masked || key0 + 16 * mt + 8 * half + g <= p[c] ? __fmul_rn(x, scale) : -INFINITY;
        }
  };
  if (whole)
    scale_mask(std::false_type{});
  else
    scale_mask(std::true_type{});
#pragma unroll
  for (int c = 0; c < 2; c++) {
    float m = -INFINITY;
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
      for (int half = 0; half < 2; half++) m = fmaxf(m, s[mt][2 * half + c]);
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
    t.m[c] = m;
    // p = 2^(s - m); l in tree8's order: this lane's residue is g (keys 8 n + g, n = 2 mt +
    // half), its pair g ^ 1 by xor 4, the pairs' sums by xor 8 and 16.
    const float z = max_or_zero(m);
    float v[8];
#pragma unroll
    for (int n = 0; n < 8; n++) {
      float& x = s[n >> 1][2 * (n & 1) + c];
      x = exp2_canon(__fsub_rn(x, z));
      v[n] = x;
    }
    float l = tree8(v);
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 4));
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 8));
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 16));
    t.l[c] = l;
  }
#pragma unroll
  for (int i = 0; i < D / 16; i++) {
#pragma unroll
    for (int e = 0; e < 4; e++) t.acc[i][e] = 0.0f;
  }
  // O^T += V^T P^T per key k-step kk (= m-tile kk): P^T's B fragment is the f16 / bf16 pairs of
  // (key, heads 2t, 2t + 1) transposed to (head g, keys 2t, 2t + 1); V by the tile partials'
  // ldmatrix .trans (and for e4m3 byte permutes), whose pairs are V^T's A fragment.
  auto pack = [](float lo, float hi) { return F8 ? pack_f16(lo, hi) : pack_bf16(lo, hi); };
  hooks.before_v();
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    const uint32_t b0 = movmatrix_trans(pack(s[kk][0], s[kk][1]));
    const uint32_t b1 = movmatrix_trans(pack(s[kk][2], s[kk][3]));
    if constexpr (!F8) {
      // Matrices (keys 0..7, dims 0..7), (keys 0..7, dims 8..15), (keys 8..15, dims 0..7),
      // (keys 8..15, dims 8..15) of dim block db, transposed: V^T's a0..a3 in order.
      const int vkey = kk * 16 + (lane & 7) + ((lane >> 4) << 3);
#pragma unroll
      for (int db = 0; db < D / 16; db++) {
        uint32_t a[4];
        ldmatrix_x4_trans(a, vs + L::off(vkey, 2 * db + ((lane >> 3) & 1)));
        mma_bf16(t.acc[db], a, b0, b1);
      }
    } else {
#pragma unroll
      for (int db = 0; db < D / 16; db += 2) {
        // L::off(16 kk + (lane & 7) + 8 ((lane >> 3) & 1), db + (lane >> 4))
        uint32_t b[4];
        ldmatrix_x4_trans(b, smem_u32(vs) + (db == 0 ? lo8.v0 : lo8.v2) + 1024 * kk);
#pragma unroll
        for (int m = 0; m < 2; m++) {
          // keys 2t, 2t+1 | keys 8 + 2t, 9 + 2t; each word's dim 2g pair low, 2g + 1 pair high
          uint32_t a[4];
          probe_e4m3x4_to_f16x2x2(__byte_perm(b[2 * m], 0, 0x3120), a[0], a[1]);
          probe_e4m3x4_to_f16x2x2(__byte_perm(b[2 * m + 1], 0, 0x3120), a[2], a[3]);
          probe_mma_f16(t.acc[db + m], a, b0, b1);
        }
      }
    }
  }
}

}  // namespace loom::gpu::mma_impl
