// Shared pieces of the tensor-core paged attention kernels (attention_mma.cu: the split
// decode, prefill and combine kernels): the canonical arithmetic (see attention_mma.cu's
// header comment), the tile loads and the PTX wrappers. Included by attention_mma.cu only.
#pragma once

#include <algorithm>
#include <cfloat>

#include "kernels/attention.cuh"
#include "kernels/common.cuh"
#include "kernels/kv_quant.cuh"

namespace loom::gpu::mma_impl {

constexpr int kThreads = kMmaWarps * 32;
constexpr float kLog2e = 1.44269504088896341f;

// Shared-memory tile of 64 keys x D bf16, rows padded by 8 elements (16 bytes) so that the 8
// row addresses of an ldmatrix land on distinct banks (D = 64: 144-byte rows; D = 16: 48).
template <int D>
struct MmaTile {
  static constexpr int kStride = D + 8;                  // elements per key row
  static constexpr int kElems = kMmaTileKeys * kStride;  // one K or V tile
  static constexpr int kPairBytes = 2 * kElems * 2;      // K tile then V tile
  static constexpr int kFoldFloats = 16 * D + 2 * 16;    // decode fold: acc [16][D], m, l
  static_assert(kFoldFloats * 4 <= kElems * 2, "fold area must fit in the K tile");
  static_assert(kPairBytes % 16 == 0, "16-byte aligned tiles");
  // FP8 KV: a key row's D e4m3 bytes land (cp.async) in the last D bytes of its bf16 row slot
  // and are widened in place (convert_fp8_tile): no extra shared memory.
  static constexpr int kRowBytes = kStride * 2;
  static constexpr int kStageOff = kRowBytes - D;
  static_assert(kStageOff % 16 == 0, "16-byte aligned staging");
};

template <int D>
constexpr float scale_log2() {
  static_assert(D == 16 || D == 64, "head_dim 16 or 64");
  return kLog2e / (D == 16 ? 4.0f : 8.0f);  // 1/sqrt(D) exact: a power of two
}

// ---- PTX wrappers --------------------------------------------------------------------------

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;  // 0: nothing read, 16 zero bytes written
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low 16 bits
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 2^x by the one hardware instruction, the same in every kernel (exp2f's code could differ).
__device__ __forceinline__ float exp2_canon(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// ---- the canonical arithmetic --------------------------------------------------------------

struct MergeWeights {
  float m, a, b;
};
__device__ __forceinline__ MergeWeights merge_weights(float ma, float mb) {
  MergeWeights w;
  w.m = fmaxf(ma, mb);
  w.a = ma == -INFINITY ? 0.0f : exp2_canon(__fsub_rn(ma, w.m));
  w.b = mb == -INFINITY ? 0.0f : exp2_canon(__fsub_rn(mb, w.m));
  return w;
}
__device__ __forceinline__ float merge_value(float xa, float xb, const MergeWeights& w) {
  return __fadd_rn(__fmul_rn(xa, w.a), __fmul_rn(xb, w.b));
}

// (m, l, acc) of a thread's two rows g and g + 8 (h = 0, 1) over its columns of the C
// fragments: acc[i][2h + e] is dim i * 8 + 2 (lane % 4) + e of row g + 8h.
template <int D>
struct RowState {
  float m[2], l[2];
  float acc[D / 8][4];
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int h = 0; h < 2; h++) m[h] = -INFINITY, l[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][e] = 0.0f;
  }
};

// s = merge(s, t) for row half h (a compile-time index after unrolling).
template <int D>
__device__ __forceinline__ void merge_row(RowState<D>& s, const RowState<D>& t, int h) {
  const MergeWeights w = merge_weights(s.m[h], t.m[h]);
  s.l[h] = merge_value(s.l[h], t.l[h], w);
#pragma unroll
  for (int i = 0; i < D / 8; i++)
#pragma unroll
    for (int e = 0; e < 2; e++)
      s.acc[i][2 * h + e] = merge_value(s.acc[i][2 * h + e], t.acc[i][2 * h + e], w);
  s.m[h] = w.m;
}

// Q rows g and g + 8 of the A operand for the D / 16 k-steps, straight from qkv (null: zero
// row). Each register is two neighbouring bf16 dims.
template <int D>
__device__ __forceinline__ void load_q(const bf16* q_lo, const bf16* q_hi, int lane,
                                       uint32_t (&qa)[D / 16][4]) {
  const int d0 = (lane & 3) * 2;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++) {
    const int d = ks * 16 + d0;
    qa[ks][0] = q_lo ? *reinterpret_cast<const uint32_t*>(q_lo + d) : 0u;
    qa[ks][1] = q_hi ? *reinterpret_cast<const uint32_t*>(q_hi + d) : 0u;
    qa[ks][2] = q_lo ? *reinterpret_cast<const uint32_t*>(q_lo + d + 8) : 0u;
    qa[ks][3] = q_hi ? *reinterpret_cast<const uint32_t*>(q_hi + d + 8) : 0u;
  }
}

// load_q with RoPE at position pos applied first (fuse_rope), rounded to bf16 as
// rope_kv_write stores q: the same bits. Dims d and d + D/2 of a row sit in the same thread
// (D = 64: k-steps ks and ks + 2; D = 16: registers r and r + 2), so each pair is rotated once.
template <int D>
__device__ __forceinline__ void load_q_rope(const bf16* q_lo, const bf16* q_hi, float pos,
                                            const float* inv_freq, int lane,
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
      const int j = base + d0;
      float lo0, lo1, hi0, hi1;
      rope_pair(__bfloat162float(q[j]), __bfloat162float(q[j + kHalf]), pos, inv_freq[j], lo0, hi0);
      rope_pair(__bfloat162float(q[j + 1]), __bfloat162float(q[j + 1 + kHalf]), pos,
                inv_freq[j + 1], lo1, hi1);
      qa[ks][reg] = pack_bf16(lo0, lo1);
      qa[pks][preg] = pack_bf16(hi0, hi1);
    }
}

// cp.async of keys [key0, key0 + 64) of one kv head into ks / vs (rows gathered through the
// block table; keys >= n_keys are zero-filled, so that masked keys meet P = 0 and V = 0,
// never a stale NaN). Row skip_key (if in the tile; -1: none) is left alone: the caller fills
// it (the new key, which the previous kernel or this one writes). The calling threads (tid <
// kN; those past a whole number of rows' chunks idle) take the 16-byte chunks: a thread keeps
// its chunk column and steps over keys, following the block table without a division per key;
// its block-table entries are all read first (independent loads: one latency, not one per
// key). F8: the caches hold e4m3 and each row lands in its staging bytes (MmaTile::kStageOff)
// for convert_fp8_tile.
template <int D, int kN, bool F8>
__device__ __forceinline__ void load_tile(const void* kc, const void* vc, const int32_t* bt,
                                          int block_size, size_t kv_row, int hkv, int key0,
                                          int n_keys, int skip_key, bf16* ks, bf16* vs, int tid) {
  constexpr int kEB = F8 ? 1 : 2;        // bytes per cache element
  constexpr int kChunks = D * kEB / 16;  // 16-byte chunks per key row of one head
  constexpr int kStep = kN / kChunks < kMmaTileKeys ? kN / kChunks : kMmaTileKeys;
  constexpr int kPasses = kMmaTileKeys / kStep;  // passes over the tile
  static_assert(kN % kChunks == 0 && kMmaTileKeys % kStep == 0, "threads per tile load");
  if (tid >= kStep * kChunks) return;
  const int c = tid % kChunks, kk0 = tid / kChunks;  // key kk0 + j * kStep in pass j
  int phys[kPasses], offs[kPasses];                  // block-table entry, offset in block
  int blk = (key0 + kk0) / block_size, off = key0 + kk0 - blk * block_size;
#pragma unroll
  for (int j = 0; j < kPasses; j++) {
    offs[j] = off;
    phys[j] = key0 + kk0 + j * kStep < n_keys ? bt[blk] : 0;
    off += kStep;
    while (off >= block_size) off -= block_size, blk++;
  }
  const char* kb = static_cast<const char*>(kc);
  const char* vb = static_cast<const char*>(vc);
#pragma unroll
  for (int j = 0; j < kPasses; j++) {
    const int kk = kk0 + j * kStep, key = key0 + kk;
    if (key == skip_key) continue;
    const bool valid = key < n_keys;
    const size_t src =
        valid ? ((size_t(phys[j]) * block_size + offs[j]) * kv_row + size_t(hkv) * D) * kEB + c * 16
              : 0;
    const int dst = kk * MmaTile<D>::kRowBytes + (F8 ? MmaTile<D>::kStageOff : 0) + c * 16;
    cp_async16(reinterpret_cast<char*>(ks) + dst, kb + src, valid);
    cp_async16(reinterpret_cast<char*>(vs) + dst, vb + src, valid);
  }
}

// Widens the staged e4m3 rows of a K and a V tile to bf16 in place (exact: every e4m3 value
// is a bf16), after their cp.async copies have landed. The kN calling threads (one warp, or
// the block) read whole rows' staged bytes into registers, synchronise, then write the rows
// (a row's bf16 bytes overlap its own staging), kRows rows at a time.
template <int D, int kN>
__device__ __forceinline__ void convert_fp8_tile(bf16* ks, bf16* vs, int tid) {
  using Tl = MmaTile<D>;
  constexpr int kChunks = D / 16;                     // staged 16-byte chunks per row
  constexpr int kItems = 2 * kMmaTileKeys * kChunks;  // (tensor, row, chunk)
  constexpr int kPer = 4;                             // chunks in registers per thread and round
  constexpr int kRound = kN * kPer < kItems ? kN * kPer : kItems;
  static_assert(kItems % kRound == 0 && kRound % (2 * kChunks) == 0, "whole rows per round");
  auto sync = [] {
    if constexpr (kN == 32)
      __syncwarp();
    else
      __syncthreads();
  };
  for (int r0 = 0; r0 < kItems; r0 += kRound) {
    uint4 x[kPer];
#pragma unroll
    for (int i = 0; i < kPer; i++) {
      const int it = r0 + tid + i * kN;
      if (it >= r0 + kRound) break;
      const int c = it % kChunks, row = (it / kChunks) % kMmaTileKeys, tensor = it / (kItems / 2);
      const char* base = reinterpret_cast<const char*>(tensor ? vs : ks);
      x[i] = *reinterpret_cast<const uint4*>(base + row * Tl::kRowBytes + Tl::kStageOff + c * 16);
    }
    sync();
#pragma unroll
    for (int i = 0; i < kPer; i++) {
      const int it = r0 + tid + i * kN;
      if (it >= r0 + kRound) break;
      const int c = it % kChunks, row = (it / kChunks) % kMmaTileKeys, tensor = it / (kItems / 2);
      char* base = reinterpret_cast<char*>(tensor ? vs : ks);
      const uint32_t w[4] = {x[i].x, x[i].y, x[i].z, x[i].w};
      uint4 lo, hi;
      lo.x = fp8x2_to_bf16x2(uint16_t(w[0])), lo.y = fp8x2_to_bf16x2(uint16_t(w[0] >> 16));
      lo.z = fp8x2_to_bf16x2(uint16_t(w[1])), lo.w = fp8x2_to_bf16x2(uint16_t(w[1] >> 16));
      hi.x = fp8x2_to_bf16x2(uint16_t(w[2])), hi.y = fp8x2_to_bf16x2(uint16_t(w[2] >> 16));
      hi.z = fp8x2_to_bf16x2(uint16_t(w[3])), hi.w = fp8x2_to_bf16x2(uint16_t(w[3] >> 16));
      uint4* dst = reinterpret_cast<uint4*>(base + row * Tl::kRowBytes + c * 32);
      dst[0] = lo;
      dst[1] = hi;
    }
    sync();
  }
}

// cp.async of key `key`'s K and V rows (one kv head) into row kk of ks / vs (F8: its staging
// bytes); the first D · bytes / 16 calling threads (tid) take one 16-byte chunk each.
template <int D, bool F8>
__device__ __forceinline__ void load_row(const void* kc, const void* vc, const int32_t* bt,
                                         int block_size, size_t kv_row, int hkv, int key, int kk,
                                         bf16* ks, bf16* vs, int tid) {
  constexpr int kEB = F8 ? 1 : 2;
  if (tid >= D * kEB / 16) return;
  const size_t src =
      ((size_t(bt[key / block_size]) * block_size + key % block_size) * kv_row + size_t(hkv) * D) *
          kEB +
      tid * 16;
  const int dst = kk * MmaTile<D>::kRowBytes + (F8 ? MmaTile<D>::kStageOff : 0) + tid * 16;
  cp_async16(reinterpret_cast<char*>(ks) + dst, static_cast<const char*>(kc) + src, true);
  cp_async16(reinterpret_cast<char*>(vs) + dst, static_cast<const char*>(vc) + src, true);
}

// The tile partial of keys [key0, key0 + 64) (in ks / vs) for the warp's 16 rows; p_lo / p_hi
// are the positions of rows g and g + 8 (-1: padding row, everything masked).
// scale: scale_log2<D>() times the K scale (1 unless the cache is FP8).
template <int D>
__device__ __forceinline__ void tile_partial(const uint32_t (&qa)[D / 16][4], const bf16* ks,
                                             const bf16* vs, int key0, int p_lo, int p_hi, int lane,
                                             float scale, RowState<D>& t) {
  constexpr int kStride = MmaTile<D>::kStride;
  const int tig = lane & 3;
  float s[8][4];  // C fragments of the 8 n-tiles of 8 keys
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) s[n][e] = 0.0f;
      // S = Q K^T. ldmatrix x4 (no .trans; K is [key][d] = the col-major B): matrices (keys
      // 16np + 0..7, d 16ks + 0..7), (same keys, d + 8), (keys + 8, d), (keys + 8, d + 8) =
      // b0 b1 of n-tile 2np, b0 b1 of n-tile 2np + 1. Lane l addresses matrix l / 8, row l % 8.
#pragma unroll
  for (int np = 0; np < 4; np++) {
    const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
#pragma unroll
    for (int ks_ = 0; ks_ < D / 16; ks_++) {
      const int d = ks_ * 16 + (((lane >> 3) & 1) << 3);
      uint32_t b[4];
      ldmatrix_x4(b, ks + key * kStride + d);
      mma_bf16(s[2 * np], qa[ks_], b[0], b[1]);
      mma_bf16(s[2 * np + 1], qa[ks_], b[2], b[3]);
    }
  }
  // Scale (log2 domain) and causal mask: c0 c1 are row g, c2 c3 row g + 8.
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int key = key0 + n * 8 + tig * 2 + (e & 1);
      const int p = e < 2 ? p_lo : p_hi;
      s[n][e] = key <= p ? __fmul_rn(s[n][e], scale) : -INFINITY;
    }
    // Row max: the thread's 16 values, then the 4 lanes of the quad (max is order-free).
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float m = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; n++) m = fmaxf(m, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    t.m[h] = m;
  }
  // p = 2^(s - m); l = sum in a fixed order: the thread's values n = 0..7, e = 0, 1, then
  // xor 1, xor 2 (commutative adds: all 4 lanes hold the same bits).
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const float m = t.m[h];
    float l = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const float pv = m == -INFINITY ? 0.0f : exp2_canon(__fsub_rn(s[n][2 * h + e], m));
        s[n][2 * h + e] = pv;
        l = __fadd_rn(l, pv);
      }
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
    t.l[h] = l;
  }
  // acc = bf16(P) . V. The C fragments of n-tiles 2kk, 2kk + 1 are the A fragment of key
  // k-step kk. V by ldmatrix .trans: matrices (keys 16kk + 0..7, d 16dp + 0..7), (keys + 8,
  // d), (keys, d + 8), (keys + 8, d + 8) = b0 b1 of d-tile 2dp, b0 b1 of d-tile 2dp + 1.
#pragma unroll
  for (int i = 0; i < D / 8; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) t.acc[i][e] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    uint32_t a[4];
    a[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    a[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    a[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
    for (int dp = 0; dp < D / 16; dp++) {
      const int d = dp * 16 + ((lane >> 4) << 3);
      uint32_t b[4];
      ldmatrix_x4_trans(b, vs + key * kStride + d);
      mma_bf16(t.acc[2 * dp], a, b[0], b[1]);
      mma_bf16(t.acc[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

// Row total of the partitions 0..n_parts-1 of one (tile, kv head) from mma_partial, folded in
// order, written as the output. Threads tid, tid + nthreads, ... take (row, 8 dims) items: one
// set of merge weights per row and partition serves the 8 dims (the same values as per dim);
// the partials are read kBatch partitions at a time, all loads in flight before the merges
// (a long context has 57 partitions: one L2 round trip per partition would be ~30 us). The
// combine kernel and the decode kernel's last block run this.
template <int D>
__device__ __forceinline__ void combine_partitions(const AttentionArgs& a, int tile, int hkv,
                                                   int n_parts, int slot, int tid, int nthreads) {
  constexpr int kBatch = 8;
  const int G = a.heads / a.kv_heads;
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);
  const size_t part_stride = size_t(G) * (D + 2);  // floats per partition: [G][D + 2]
  for (int i = tid; i < G * (D / 8); i += nthreads) {
    const int r = i / (D / 8), d0 = i % (D / 8) * 8;
    // Partition 0 of row r: [acc D floats, m, l]; even offsets, so float2 loads are aligned.
    const float* f =
        a.mma_partial + ((size_t(tile) * a.kv_heads + hkv) * max_parts * G + r) * (D + 2);
    float m = -INFINITY, l = 0.0f;
    float acc[8];
#pragma unroll
    for (int k = 0; k < 8; k++) acc[k] = 0.0f;
    for (int p0 = 0; p0 < n_parts; p0 += kBatch) {
      float2 ml[kBatch], x[kBatch][4];
#pragma unroll
      for (int j = 0; j < kBatch; j++) {
        if (p0 + j >= n_parts) break;
        // __ldcg: L2, never a stale L1 line (other blocks wrote these)
        const float* fp = f + size_t(p0 + j) * part_stride;
        ml[j] = __ldcg(reinterpret_cast<const float2*>(fp + D));
#pragma unroll
        for (int k = 0; k < 4; k++) x[j][k] = __ldcg(reinterpret_cast<const float2*>(fp + d0) + k);
      }
#pragma unroll
      for (int j = 0; j < kBatch; j++) {
        if (p0 + j >= n_parts) break;
        const MergeWeights mw = merge_weights(m, ml[j].x);
        l = merge_value(l, ml[j].y, mw);
#pragma unroll
        for (int k = 0; k < 4; k++) {
          acc[2 * k] = merge_value(acc[2 * k], x[j][k].x, mw);
          acc[2 * k + 1] = merge_value(acc[2 * k + 1], x[j][k].y, mw);
        }
        m = mw.m;
      }
    }
    bf16* o = static_cast<bf16*>(a.out) + size_t(slot) * a.heads * D + size_t(hkv * G + r) * D + d0;
    const float vsc = kv_scale_of(a.kv_scale, a.kv_heads, hkv, true);
#pragma unroll
    for (int k = 0; k < 4; k++)
      reinterpret_cast<__nv_bfloat162*>(o)[k] = __floats2bfloat162_rn(
          __fmul_rn(__fdiv_rn(acc[2 * k], l), vsc), __fmul_rn(__fdiv_rn(acc[2 * k + 1], l), vsc));
  }
}

// Dynamic shared memory above 48 KB needs the attribute, once per kernel.
template <class K>
Status allow_smem(K* kernel, int bytes, bool& done, const char* name) {
  if (done) return Status::good();
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess)
    return Status::bad(cat(name, ": cudaFuncSetAttribute: ", cudaGetErrorString(e)));
  done = true;
  return Status::good();
}

inline int device_sms() {
  static int sms = 0;
  if (sms == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      sms = 132;
  }
  return sms;
}

}  // namespace loom::gpu::mma_impl
