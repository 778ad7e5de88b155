// RoPE inside the decode kernels (AttentionArgs::fuse_rope): rope_kv_write's work
// for a decode step's one slot a sequence, done by the attention kernel itself so that it
// follows the qkv GEMV directly. The cos and sin come before griddepcontrol.wait (step inputs
// and constants), q is rotated as it is loaded, and the warp whose tile holds the new key
// rotates it, writes K and V to the cache and puts into its tile what reading them back gives.
// rope_pair's arithmetic throughout: the same bits as rope_kv_write. Included by
// attention_mma.cu (the split decode kernel) and attention_tma.cu (the TMA decode kernel).
#pragma once

#include "kernels/attention_mma.cuh"

namespace loom::gpu::mma_impl {

// The cos and sin load_q_rope_cs rotates a lane's q dims with, of rope_pair's angle
// pos * inv_freq[j] for j = base + (lane & 3) * 2 + e (base = 8 b < D / 2, e = 0, 1), by the
// whole warp (D / 2 <= 32). Position and frequencies are step inputs and constants: the decode
// kernel computes these before its griddepcontrol.wait, off the critical path from the qkv
// GEMV's end.
template <int D>
struct RopeCs {
  float c[D / 16][2], s[D / 16][2];
};
template <int D>
__device__ __forceinline__ void rope_cs(float pos, const float* inv_freq, int lane, RopeCs<D>& r,
                                        float& own_c, float& own_s) {
  // Lane j < D / 2 computes angle j (own_c, own_s: the new key's pair (j, j + D / 2) needs just
  // that one), the others are shuffled from it: one sincosf a lane instead of 8.
  own_c = 0.0f, own_s = 0.0f;
  if (lane < D / 2) rope_angle(pos, inv_freq[lane], own_c, own_s);
  const int d0 = (lane & 3) * 2;
#pragma unroll
  for (int b = 0; b < D / 16; b++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      r.c[b][e] = __shfl_sync(0xffffffffu, own_c, 8 * b + d0 + e);
      r.s[b][e] = __shfl_sync(0xffffffffu, own_s, 8 * b + d0 + e);
    }
}

// load_q with RoPE applied first (fuse_rope) by rope_cs's cos and sin, rounded to bf16 as
// rope_kv_write stores q: rope_pair's arithmetic, the same bits. Dims d and d + D/2 of a row sit
// in the same thread (D = 64: k-steps ks and ks + 2; D = 16: registers r and r + 2), so each pair
// is rotated once.
template <int D>
__device__ __forceinline__ void load_q_rope_cs(const bf16* q_lo, const bf16* q_hi,
                                               const RopeCs<D>& cs, int lane,
                                               uint32_t (&qa)[D / 16][4]) {
  constexpr int kHalf = D / 2;
  const int d0 = (lane & 3) * 2;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
    for (int reg = 0; reg < 4; reg++) {
      const int base = ks * 16 + (reg >> 1) * 8;  // first dim of the register's 8-dim group
      if (base >= kHalf) continue;
      const int pb = base + kHalf;
      const int pks = pb / 16, preg = (reg & 1) | (((pb % 16) / 8) << 1);
      const bf16* q = (reg & 1) ? q_hi : q_lo;
      if (q == nullptr) {
        qa[ks][reg] = qa[pks][preg] = 0u;
        continue;
      }
      const int j = base + d0, b = base / 8;
      float lo0, lo1, hi0, hi1;
      rope_rotate(__bfloat162float(q[j]), __bfloat162float(q[j + kHalf]), cs.c[b][0], cs.s[b][0],
                  lo0, hi0);
      rope_rotate(__bfloat162float(q[j + 1]), __bfloat162float(q[j + 1 + kHalf]), cs.c[b][1],
                  cs.s[b][1], lo1, hi1);
      qa[ks][reg] = pack_bf16(lo0, lo1);
      qa[pks][preg] = pack_bf16(hi0, hi1);
    }
}

// load_q_f8 with RoPE applied first (fuse_rope over an FP8 cache): each of the lane's dims
// rotated with its pair (j, j + D / 2) by rope_pair's arithmetic and rounded to bf16, as
// rope_kv_write stores q, then load_q_f8's clamp and f16 packing: the same bits. own_c, own_s:
// lane j's angle j (j < D / 2), shuffled to the lanes that need it. The whole warp calls it.
template <int D>
__device__ __forceinline__ void load_q_rope_f8(const bf16* q_lo, const bf16* q_hi, float own_c,
                                               float own_s, int lane, uint32_t (&qa)[D / 16][4]) {
  constexpr int kHalf = D / 2;
  auto value = [](const bf16* q, int d, float c, float s) {
    if (q == nullptr) return 0.0f;
    const int j = d % kHalf;
    float y0, y1;
    rope_rotate(__bfloat162float(q[j]), __bfloat162float(q[j + kHalf]), c, s, y0, y1);
    return clamp_f16(round_to<bf16>(d < kHalf ? y0 : y1));
  };
  const int d0 = (lane & 3) * 4;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++) {
    float lo[4], hi[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int d = ks * 16 + d0 + e;
      const float c = __shfl_sync(0xffffffffu, own_c, d % kHalf);
      const float s = __shfl_sync(0xffffffffu, own_s, d % kHalf);
      lo[e] = value(q_lo, d, c, s);
      hi[e] = value(q_hi, d, c, s);
    }
    qa[ks][0] = pack_f16(lo[0], lo[1]);
    qa[ks][1] = pack_f16(hi[0], hi[1]);
    qa[ks][2] = pack_f16(lo[2], lo[3]);
    qa[ks][3] = pack_f16(hi[2], hi[3]);
  }
}

// The decode kernels' RoPE angles before their wait (fuse_rope): over bf16 rope_cs's; over FP8
// only the lane's own angle (load_q_rope_f8 shuffles them from their lanes). own_c, own_s: the
// new key's pair (lane, lane + D / 2).
template <int D, bool F8>
__device__ __forceinline__ void rope_angles(float pos, const float* inv_freq, int lane,
                                            RopeCs<D>& rc, float& own_c, float& own_s) {
  if constexpr (F8) {
    own_c = 0.0f, own_s = 0.0f;
    if (lane < D / 2) rope_angle(pos, inv_freq[lane], own_c, own_s);
  } else {
    rope_cs<D>(pos, inv_freq, lane, rc, own_c, own_s);
  }
}

// The decode kernels' q fragments (f16 over an FP8 cache, else bf16), rotated as they are
// loaded where fuse (rope_angles' rc, own_c, own_s).
template <int D, bool F8>
__device__ __forceinline__ void load_q_decode(const bf16* q_lo, const bf16* q_hi, bool fuse,
                                              const RopeCs<D>& rc, float own_c, float own_s,
                                              int lane, uint32_t (&qa)[D / 16][4]) {
  if constexpr (F8) {
    if (fuse)
      load_q_rope_f8<D>(q_lo, q_hi, own_c, own_s, lane, qa);
    else
      load_q_f8<D>(q_lo, q_hi, lane, qa);
  } else if (fuse) {
    load_q_rope_cs<D>(q_lo, q_hi, rc, lane, qa);
  } else {
    load_q<D>(q_lo, q_hi, lane, qa);
  }
}

// The step's new key and value of kv head hkv (qkv_row: the slot's q, k, v heads): K's dims
// (lane, lane + D / 2) rotated by (new_c, new_s) (rope_cs's own pair), both quantized as
// rope_kv_write stores them (KV: the cache's element, bf16 or e4m3) and written to the cache at
// cache slot cs (none where cs < 0) and into row `row` of the tiles ks / vs laid out as L
// (16-byte chunks c at L::off(row, c)), which hold the cache's elements as they are. The whole
// warp calls it (D / 2 <= 32). parts: 1 K only, 2 V only, 3 both (a tile whose K and V land on
// barriers of their own).
template <int D, class L, class KV>
__device__ __forceinline__ void write_new_kv(const AttentionArgs& a, const bf16* qkv_row, int hkv,
                                             int cs, float new_c, float new_s, float k_scale,
                                             float v_scale, char* ks, char* vs, int row, int lane,
                                             int parts = 3) {
  constexpr int kHalf = D / 2, kPerChunk = 16 / int(sizeof(KV));
  const bf16* kq = qkv_row + size_t(a.heads + hkv) * D;
  const bf16* vq = qkv_row + size_t(a.heads + a.kv_heads + hkv) * D;
  const size_t at = size_t(cs) * a.kv_heads * D + size_t(hkv) * D;
  KV* kw = static_cast<KV*>(const_cast<void*>(a.k_cache)) + at;
  KV* vw = static_cast<KV*>(const_cast<void*>(a.v_cache)) + at;
  auto tile_at = [&](char* t, int j) {
    return reinterpret_cast<KV*>(t + L::off(row, j / kPerChunk)) + j % kPerChunk;
  };
  const float k_inv = 1.0f / k_scale, v_inv = 1.0f / v_scale;
  if (const int j = lane; (parts & 1) && j < kHalf) {
    float y0, y1;
    rope_rotate(__bfloat162float(kq[j]), __bfloat162float(kq[j + kHalf]), new_c, new_s, y0, y1);
    const KV c0 = kv_from_f32<KV>(round_to<bf16>(y0), k_inv);
    const KV c1 = kv_from_f32<KV>(round_to<bf16>(y1), k_inv);
    *tile_at(ks, j) = c0;
    *tile_at(ks, j + kHalf) = c1;
    if (cs >= 0) kw[j] = c0, kw[j + kHalf] = c1;
  }
  for (int j = lane; (parts & 2) && j < D; j += 32) {
    const KV c = kv_from_f32<KV>(__bfloat162float(vq[j]), v_inv);
    *tile_at(vs, j) = c;
    if (cs >= 0) vw[j] = c;
  }
}

}  // namespace loom::gpu::mma_impl
