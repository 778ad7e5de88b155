// Shared pieces of the tensor-core paged attention kernels (attention_mma.cu: the split
// decode, prefill and combine kernels): the canonical arithmetic (see attention_mma.cu's
// header comment), the tile loads and the PTX wrappers. Included by attention_mma.cu only.
#pragma once

#include <algorithm>
#include <cfloat>
#include <type_traits>

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
  static constexpr int kRowBytes = kStride * 2;
  static constexpr int kTileBytes = kElems * 2;  // the V tile's offset in a pair
};

// The same for an FP8 cache: 64 keys x D e4m3 bytes, rows of 80 (D = 64) or 48 (D = 16)
// bytes, so that the 8 rows of an ldmatrix (16 bytes each) fall on distinct banks.
template <int D>
struct MmaTileF8 {
  static constexpr int kRowBytes = D == 64 ? 80 : 48;
  static constexpr int kTileBytes = kMmaTileKeys * kRowBytes;
  static constexpr int kPairBytes = 2 * kTileBytes;
  static constexpr int kFoldFloats = 16 * D + 2 * 16;
  static_assert(kFoldFloats * 4 <= kTileBytes, "fold area must fit in the K tile");
};

template <int D, bool F8>
using TileOf = std::conditional_t<F8, MmaTileF8<D>, MmaTile<D>>;

template <int D>
constexpr float scale_log2() {
  static_assert(D == 16 || D == 64, "head_dim 16 or 64");
  return kLog2e / (D == 16 ? 4.0f : 8.0f);  // 1/sqrt(D) exact: a power of two
}

// ---- PTX wrappers --------------------------------------------------------------------------

// (s: a shared-memory address, as smem_u32 gives it)
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  ldmatrix_x4(r, smem_u32(p));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  ldmatrix_x4_trans(r, smem_u32(p));
}

// The x1 / x2 forms, for head_dim 16's FP8 tiles (one or two 16-byte dim blocks).
__device__ __forceinline__ void ldmatrix_x1(uint32_t& r, const void* p) {
  const uint32_t s = smem_u32(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r)
               : "r"(s)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* p) {
  const uint32_t s = smem_u32(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
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

// The max m to subtract before exp2_canon, as 0 where m = -inf: the values under it are then all
// -inf (masked), x - 0 = -inf and ex2.approx(-inf) = +0, the 0 a `m == -inf ? 0 : 2^(x - m)`
// select gives, without x - m = NaN and without a zeroed register and a predicated MUFU a value.
__device__ __forceinline__ float max_or_zero(float m) {
  return m == -INFINITY ? 0.0f : m;
}

struct MergeWeights {
  float m, a, b;
};
__device__ __forceinline__ MergeWeights merge_weights(float ma, float mb) {
  MergeWeights w;
  w.m = fmaxf(ma, mb);
  const float z = max_or_zero(w.m);  // a side at -inf weighs 2^-inf = 0
  w.a = exp2_canon(__fsub_rn(ma, z));
  w.b = exp2_canon(__fsub_rn(mb, z));
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

// cp.async of keys [key0, key0 + 64) of one kv head into ks / vs (rows gathered through the
// block table; keys >= n_keys are zero-filled, so that masked keys meet P = 0 and V = 0,
// never a stale NaN), in two steps: read (the block-table entries) and issue (the copies).
// Row skip_key (if in the tile; -1: none) is left alone: the caller fills it (the new key,
// which the previous kernel or this one writes). The calling threads (tid < kN; those past a
// whole number of rows' chunks idle) take the 16-byte chunks: a thread keeps its chunk column
// and steps over keys, following the block table without a division per key; its entries are
// all read first (independent loads: one latency, not one per key), whatever n_keys (entries
// past bt_len - 1 read as the last one), so that the decode kernel reads them before the load
// that gives n_keys returns. F8: the caches and the tiles hold e4m3 (MmaTileF8).
template <int D, int kN, bool F8>
struct TileLoad {
  static constexpr int kEB = F8 ? 1 : 2;        // bytes per cache element
  static constexpr int kChunks = D * kEB / 16;  // 16-byte chunks per key row of one head
  static constexpr int kStep = kN / kChunks < kMmaTileKeys ? kN / kChunks : kMmaTileKeys;
  static constexpr int kPasses = kMmaTileKeys / kStep;  // passes over the tile
  static_assert(kN % kChunks == 0 && kMmaTileKeys % kStep == 0, "threads per tile load");
  int phys[kPasses], offs[kPasses];  // block-table entry, offset in block

  __device__ __forceinline__ void read(const int32_t* bt, int bt_len, int block_size, int key0,
                                       int tid) {
    if (tid >= kStep * kChunks) return;
    const int kk0 = tid / kChunks;
    int blk = (key0 + kk0) / block_size, off = key0 + kk0 - blk * block_size;
#pragma unroll
    for (int j = 0; j < kPasses; j++) {
      offs[j] = off;
      phys[j] = bt[min(blk, bt_len - 1)];
      off += kStep;
      while (off >= block_size) off -= block_size, blk++;
    }
  }
  __device__ __forceinline__ void issue(const void* kc, const void* vc, int block_size,
                                        size_t kv_row, int hkv, int key0, int n_keys, int skip_key,
                                        void* ks, void* vs, int tid) const {
    if (tid >= kStep * kChunks) return;
    const int c = tid % kChunks, kk0 = tid / kChunks;  // key kk0 + j * kStep in pass j
    const char* kb = static_cast<const char*>(kc);
    const char* vb = static_cast<const char*>(vc);
#pragma unroll
    for (int j = 0; j < kPasses; j++) {
      const int kk = kk0 + j * kStep, key = key0 + kk;
      if (key == skip_key) continue;
      const bool valid = key < n_keys;
      const size_t src =
          valid
              ? ((size_t(phys[j]) * block_size + offs[j]) * kv_row + size_t(hkv) * D) * kEB + c * 16
              : 0;
      const int dst = kk * TileOf<D, F8>::kRowBytes + c * 16;
      cp_async16(reinterpret_cast<char*>(ks) + dst, kb + src, valid);
      cp_async16(reinterpret_cast<char*>(vs) + dst, vb + src, valid);
    }
  }
};
template <int D, int kN, bool F8>
__device__ __forceinline__ void load_tile(const void* kc, const void* vc, const int32_t* bt,
                                          int bt_len, int block_size, size_t kv_row, int hkv,
                                          int key0, int n_keys, int skip_key, void* ks, void* vs,
                                          int tid) {
  TileLoad<D, kN, F8> t;
  t.read(bt, bt_len, block_size, key0, tid);
  t.issue(kc, vc, block_size, kv_row, hkv, key0, n_keys, skip_key, ks, vs, tid);
}

// cp.async of key `key`'s K and V rows (one kv head) into row kk of ks / vs; the first
// D · bytes / 16 calling threads (tid) take one 16-byte chunk each.
template <int D, bool F8>
__device__ __forceinline__ void load_row(const void* kc, const void* vc, const int32_t* bt,
                                         int block_size, size_t kv_row, int hkv, int key, int kk,
                                         void* ks, void* vs, int tid) {
  constexpr int kEB = F8 ? 1 : 2;
  if (tid >= D * kEB / 16) return;
  const size_t src =
      ((size_t(bt[key / block_size]) * block_size + key % block_size) * kv_row + size_t(hkv) * D) *
          kEB +
      tid * 16;
  const int dst = kk * TileOf<D, F8>::kRowBytes + tid * 16;
  cp_async16(reinterpret_cast<char*>(ks) + dst, static_cast<const char*>(kc) + src, true);
  cp_async16(reinterpret_cast<char*>(vs) + dst, static_cast<const char*>(vc) + src, true);
}

// A tile's l, the canonical order (every kernel, either operand order): S_c = tree8 of the 8
// values p of keys 8 n + c (n = 0..7), c = key % 8; P_j = S_2j + S_2j+1; l = (P_0 + P_1) +
// (P_2 + P_3). Each add rounded on its own; adds are commutative, so lanes that combine the
// same two values by a shuffle hold the same bits.
__device__ __forceinline__ float tree8(const float (&v)[8]) {
  return __fadd_rn(__fadd_rn(__fadd_rn(v[0], v[1]), __fadd_rn(v[2], v[3])),
                   __fadd_rn(__fadd_rn(v[4], v[5]), __fadd_rn(v[6], v[7])));
}

// The softmax part of a tile partial, on the 8 n-tiles' score fragments s (c0 c1 row g, c2 c3
// row g + 8): scale (log2 domain) and causal mask, the row max m, p = 2^(s - m) in place and
// l = their sum (the canonical order, tree8), each in one fixed order; acc zeroed for P·V.
template <int D>
__device__ __forceinline__ void tile_softmax(float (&s)[8][4], int key0, int p_lo, int p_hi,
                                             int tig, float scale, RowState<D>& t) {
  // Rows g + 8 are padding in every lane of a decode warp with G <= 8 (Terra's 8): their
  // masked values would give m = -inf, p = 0, l = 0; set those directly (the same bits) and
  // spend the exponentials on live rows only. The test is warp-uniform, so the shuffles below
  // run with the whole warp.
  const bool hi_live = __any_sync(0xffffffffu, p_hi >= 0);
  if (!hi_live) {
    t.m[1] = -INFINITY;
    t.l[1] = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; n++) s[n][2] = s[n][3] = 0.0f;
  }
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      if (e >= 2 && !hi_live) continue;
      const int key = key0 + n * 8 + tig * 2 + (e & 1);
      const int p = e < 2 ? p_lo : p_hi;
      s[n][e] = key <= p ? __fmul_rn(s[n][e], scale) : -INFINITY;
    }
    // Row max: the thread's 16 values, then the 4 lanes of the quad (max is order-free).
#pragma unroll
  for (int h = 0; h < 2; h++) {
    if (h == 1 && !hi_live) continue;
    float m = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; n++) m = fmaxf(m, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    t.m[h] = m;
  }
  // p = 2^(s - m); l = canonical_tile_sum: this lane holds the key residues c = 2 tig + e.
#pragma unroll
  for (int h = 0; h < 2; h++) {
    if (h == 1 && !hi_live) continue;
    const float z = max_or_zero(t.m[h]);
    float sc[2];
#pragma unroll
    for (int e = 0; e < 2; e++) {
      float v[8];
#pragma unroll
      for (int n = 0; n < 8; n++) {
        v[n] = exp2_canon(__fsub_rn(s[n][2 * h + e], z));
        s[n][2 * h + e] = v[n];
      }
      sc[e] = tree8(v);
    }
    float l = __fadd_rn(sc[0], sc[1]);
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
    t.l[h] = l;
  }
#pragma unroll
  for (int i = 0; i < D / 8; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) t.acc[i][e] = 0.0f;
}

__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// P's A fragment for key k-step kk: the C fragments of n-tiles 2kk, 2kk + 1, rounded to f16
// (the FP8 cache's f16 mma) or bf16.
template <bool F16>
__device__ __forceinline__ void p_fragment(const float (&s)[8][4], int kk, uint32_t (&a)[4]) {
  auto pack = [](float lo, float hi) { return F16 ? pack_f16(lo, hi) : pack_bf16(lo, hi); };
  a[0] = pack(s[2 * kk][0], s[2 * kk][1]);
  a[1] = pack(s[2 * kk][2], s[2 * kk][3]);
  a[2] = pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// Where the 16-byte chunk c of key row r sits in a tile (bytes from the tile's start): rows
// padded to kRowBytes (the cp.async tiles above), or TMA's 64- / 128-byte swizzle of 64- /
// 128-byte rows (attention_tma.cu), in which chunk c of row r lands at chunk c ^ (r / 2 % 4) /
// c ^ (r % 8) of its row, so that the 8 rows of an ldmatrix hit distinct banks. The layout
// changes addresses only: the fragments, and so the bits, are the same.
template <int kRowBytes>
struct PaddedRows {
  static __device__ __forceinline__ int off(int r, int c) { return r * kRowBytes + c * 16; }
};
struct Swizzle64 {
  static __device__ __forceinline__ int off(int r, int c) {
    return r * 64 + ((c ^ ((r >> 1) & 3)) << 4);
  }
};
struct Swizzle128 {
  static __device__ __forceinline__ int off(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }
};
template <int D>
using PaddedBf16 = PaddedRows<MmaTile<D>::kRowBytes>;
template <int D>
using PaddedF8 = PaddedRows<MmaTileF8<D>::kRowBytes>;

// The tile partial of keys [key0, key0 + 64) (in ks / vs, laid out as L) for the warp's 16
// rows; p_lo / p_hi are the positions of rows g and g + 8 (-1: padding row, everything masked).
// scale: scale_log2<D>() times the K scale (1 unless the cache is FP8).
template <int D, class L = PaddedBf16<D>>
__device__ __forceinline__ void tile_partial(const uint32_t (&qa)[D / 16][4], const char* ks,
                                             const char* vs, int key0, int p_lo, int p_hi, int lane,
                                             float scale, RowState<D>& t) {
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
      uint32_t b[4];  // chunk 2 ks_ + 1 holds dims 16 ks_ + 8 ..
      ldmatrix_x4(b, ks + L::off(key, 2 * ks_ + ((lane >> 3) & 1)));
      mma_bf16(s[2 * np], qa[ks_], b[0], b[1]);
      mma_bf16(s[2 * np + 1], qa[ks_], b[2], b[3]);
    }
  }
  tile_softmax<D>(s, key0, p_lo, p_hi, tig, scale, t);
  // acc = bf16(P) . V. The C fragments of n-tiles 2kk, 2kk + 1 are the A fragment of key
  // k-step kk. V by ldmatrix .trans: matrices (keys 16kk + 0..7, d 16dp + 0..7), (keys + 8,
  // d), (keys, d + 8), (keys + 8, d + 8) = b0 b1 of d-tile 2dp, b0 b1 of d-tile 2dp + 1.
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    uint32_t a[4];
    p_fragment<false>(s, kk, a);
    const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
    for (int dp = 0; dp < D / 16; dp++) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, vs + L::off(key, 2 * dp + (lane >> 4)));
      mma_bf16(t.acc[2 * dp], a, b[0], b[1]);
      mma_bf16(t.acc[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

// ---- the FP8 cache's tile partial -----------------------------------------------------------
// The same arithmetic on e4m3 tiles without widening them in shared memory: Q·K and P·V run as
// f16 mma (every e4m3 value is an f16; bf16 q converts exactly in f16's normal range, and is
// clamped to ±65504 beyond it; P in [0, 1] is f16's best range). The fragments come straight
// from the e4m3 tiles by ldmatrix, treating byte pairs as b16 elements:
//  - K, no .trans: lane (g, t) gets key g's bytes 4t .. 4t + 3 of a 16-dim block. The mma's k
//    index 2t, 2t + 1 then stands for dims 4t, 4t + 1 and 2t + 8, 2t + 9 for 4t + 2, 4t + 3:
//    a permutation of the dims inside the block, taken by Q's fragment too (load_q_f8), so the
//    sum over the block is the same dot product.
//  - V, .trans: lane (g, t) gets keys 2t, 2t + 1 of dims 2g and 2g + 1; one byte permute gives
//    the (key 2t, 2t + 1) pair of dim 2g (an mma for the even dims of the block) and one of dim
//    2g + 1 (the odd dims). acc[2 db + par] therefore holds dims 16 db + 2 n + par (acc_dim).
// Decode, prefill and chunked prefill all run this for an FP8 cache: one arithmetic, the same
// bits for a row whatever the batch.

// A word's two e4m3 byte pairs (the low byte of each first) as f16 pairs, exactly: *lo from
// bytes 0, 1, *hi from bytes 2, 3. The high pair is converted in place (F2FP's .H1 operand): a
// conversion of `w >> 16` costs a shift first (32 instructions of a 64-key tile's K), and V's
// pairs come from one byte permute (0x3120: bytes 0, 2 low, 1, 3 high) instead of two (32 more).
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t four, uint32_t& lo, uint32_t& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\n"
      "cvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(four));
}

// c += A·B, m16n8k16, f16 in, fp32 accumulate (the fragments as mma_bf16's).
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The dim of acc[i][2h + e] of lane quad position tig (bf16 tiles: i · 8 + 2 tig + e).
template <bool F8>
__device__ __forceinline__ int acc_dim(int i, int tig, int e) {
  return F8 ? 16 * (i >> 1) + 4 * tig + 2 * e + (i & 1) : i * 8 + 2 * tig + e;
}

// Row half h (row g + 8h) of the row total t as the output row o (D bf16): acc / l · v_scale,
// each product and quotient rounded on its own; the last step of every kernel's row total.
template <int D, bool F8>
__device__ __forceinline__ void store_out_row(bf16* o, const RowState<D>& t, int h, int tig,
                                              float v_scale) {
#pragma unroll
  for (int i = 0; i < D / 8; i++) {
    const float x = __fmul_rn(__fdiv_rn(t.acc[i][2 * h], t.l[h]), v_scale);
    const float y = __fmul_rn(__fdiv_rn(t.acc[i][2 * h + 1], t.l[h]), v_scale);
    if constexpr (F8) {  // the pair's dims are 2 apart (acc_dim)
      o[acc_dim<true>(i, tig, 0)] = __float2bfloat16_rn(x);
      o[acc_dim<true>(i, tig, 1)] = __float2bfloat16_rn(y);
    } else {
      *reinterpret_cast<__nv_bfloat162*>(o + i * 8 + tig * 2) = __floats2bfloat162_rn(x, y);
    }
  }
}

// A q element as the f16 A fragment takes it: clamped to f16's finite range.
__device__ __forceinline__ float clamp_f16(float x) {
  return fminf(fmaxf(x, -65504.0f), 65504.0f);
}

// Q rows g and g + 8 as f16 A fragments in the permuted dim order above (null: zero row).
template <int D>
__device__ __forceinline__ void load_q_f8(const bf16* q_lo, const bf16* q_hi, int lane,
                                          uint32_t (&qa)[D / 16][4]) {
  auto pair = [](const bf16* q, int d) -> uint32_t {
    if (q == nullptr) return 0u;
    const __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(q + d);
    return pack_f16(clamp_f16(__low2float(v)), clamp_f16(__high2float(v)));
  };
  const int d0 = (lane & 3) * 4;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++) {
    const int d = ks * 16 + d0;
    qa[ks][0] = pair(q_lo, d);
    qa[ks][1] = pair(q_hi, d);
    qa[ks][2] = pair(q_lo, d + 2);
    qa[ks][3] = pair(q_hi, d + 2);
  }
}

// tile_partial over e4m3 tiles ks / vs (laid out as L), qa from load_q_f8.
template <int D, class L = PaddedF8<D>>
__device__ __forceinline__ void tile_partial_f8(const uint32_t (&qa)[D / 16][4], const char* ks,
                                                const char* vs, int key0, int p_lo, int p_hi,
                                                int lane, float scale, RowState<D>& t) {
  const int tig = lane & 3;
  float s[8][4];
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) s[n][e] = 0.0f;
      // S = Q K^T: per n-tile (8 keys) one ldmatrix of the D / 16 dim blocks; lane l addresses row
      // l % 8 (the key) of matrix l / 8 (the block).
#pragma unroll
  for (int np = 0; np < 8; np++) {
    const int row = np * 8 + (lane & 7);
    uint32_t b[4];
    if constexpr (D == 64) {
      ldmatrix_x4(b, ks + L::off(row, lane >> 3));
    } else {
      ldmatrix_x1(b[0], ks + L::off(row, 0));
    }
#pragma unroll
    for (int k = 0; k < D / 16; k++) {
      uint32_t b0, b1;
      e4m3x4_to_f16x2x2(b[k], b0, b1);
      mma_f16(s[np], qa[k], b0, b1);
    }
  }
  tile_softmax<D>(s, key0, p_lo, p_hi, tig, scale, t);
  // acc += P V per key k-step kk: V by ldmatrix .trans, matrices (keys 16kk + 0..7, block db),
  // (keys + 8, db), (keys, db + 1), (keys + 8, db + 1).
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    uint32_t a[4];
    p_fragment<true>(s, kk, a);
    const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
    for (int db = 0; db < D / 16; db += 2) {
      uint32_t b[4];
      if constexpr (D == 64) {
        ldmatrix_x4_trans(b, vs + L::off(key, db + (lane >> 4)));
      } else {
        uint32_t b2[2];
        ldmatrix_x2_trans(b2, vs + L::off(key, 0));
        b[0] = b2[0], b[1] = b2[1], b[2] = b[3] = 0u;
      }
#pragma unroll
      for (int m = 0; m < (D == 64 ? 2 : 1); m++) {
        // keys 2t, 2t+1 | keys 8 + 2t, 9 + 2t; each word's dim 2g pair low, 2g + 1 pair high
        uint32_t lo[2], hi[2];
        e4m3x4_to_f16x2x2(__byte_perm(b[2 * m], 0, 0x3120), lo[0], lo[1]);
        e4m3x4_to_f16x2x2(__byte_perm(b[2 * m + 1], 0, 0x3120), hi[0], hi[1]);
        mma_f16(t.acc[2 * (db + m)], a, lo[0], hi[0]);
        mma_f16(t.acc[2 * (db + m) + 1], a, lo[1], hi[1]);
      }
    }
  }
}

// One partition's partial of row r, 8 dims (its m, l and acc[d0 .. d0 + 8)), merged into the
// running (m, l, acc): one set of merge weights per row and partition serves the 8 dims (the
// same values as per dim). Both folds below merge through this, in partition order.
__device__ __forceinline__ void merge_partial(float& m, float& l, float (&acc)[8], float2 ml,
                                              const float2 (&x)[4]) {
  const MergeWeights mw = merge_weights(m, ml.x);
  l = merge_value(l, ml.y, mw);
#pragma unroll
  for (int k = 0; k < 4; k++) {
    acc[2 * k] = merge_value(acc[2 * k], x[k].x, mw);
    acc[2 * k + 1] = merge_value(acc[2 * k + 1], x[k].y, mw);
  }
  m = mw.m;
}

// The folded row r, dims d0 .. d0 + 8, written as the output (acc / l, times the V scale).
template <int D>
__device__ __forceinline__ void write_row_total(const AttentionArgs& a, int hkv, int slot, int r,
                                                int d0, float l, const float (&acc)[8]) {
  const int G = a.heads / a.kv_heads;
  bf16* o = static_cast<bf16*>(a.out) + size_t(slot) * a.heads * D + size_t(hkv * G + r) * D + d0;
  const float vsc = kv_scale_of(a.kv_scale, a.kv_heads, hkv, true);
#pragma unroll
  for (int k = 0; k < 4; k++)
    reinterpret_cast<__nv_bfloat162*>(o)[k] = __floats2bfloat162_rn(
        __fmul_rn(__fdiv_rn(acc[2 * k], l), vsc), __fmul_rn(__fdiv_rn(acc[2 * k + 1], l), vsc));
}

// Row total of the partitions 0..n_parts-1 of one (tile, kv head) from mma_partial, folded in
// order, written as the output. Threads tid, tid + nthreads, ... take (row, 8 dims) items; the
// partials are read kBatch partitions at a time, all loads in flight before the merges (a long
// context has 57 partitions: one L2 round trip per partition would be ~30 us). The combine
// kernel runs this, and the decode kernel's last block where combine_partitions_staged cannot.
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
        merge_partial(m, l, acc, ml[j], x[j]);
      }
    }
    write_row_total<D>(a, hkv, slot, r, d0, l, acc);
  }
}

// combine_partitions' fold (the same merges in the same order: the same bits) with the
// partials first brought to shared memory, as many partitions at a time as `stage` holds
// (stage_bytes): `load(dst, src, bytes)`, called by all nthreads threads, returns once `bytes` of
// partials from src are in dst for every one of them to read. The nthreads threads (a block, or
// one warp with sync = __syncwarp) take kItems (row, 8 dims) items each. Needs a partition's
// [G][D + 2] floats to be whole 16-byte vectors and G * D / 8 <= kItems * nthreads; returns false
// (nothing done) otherwise, the same on every thread. Called after the point that frees `stage`.
template <int D, int kItems, class Load, class Sync>
__device__ __forceinline__ bool fold_staged(const AttentionArgs& a, int tile, int hkv, int n_parts,
                                            int slot, int tid, int nthreads, void* stage,
                                            int stage_bytes, Load&& load, Sync&& sync) {
  const int G = a.heads / a.kv_heads;
  const int pf = G * (D + 2);  // floats per partition: [G][D + 2]
  const int cap = stage_bytes / (pf * 4);
  if (pf % 4 != 0 || G * (D / 8) > kItems * nthreads || cap < 1) return false;
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);
  const float* src = a.mma_partial + (size_t(tile) * a.kv_heads + hkv) * max_parts * pf;
  float* st = static_cast<float*>(stage);  // [cap][G][D + 2]
  float m[kItems], l[kItems], acc[kItems][8];
#pragma unroll
  for (int i = 0; i < kItems; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) acc[i][k] = 0.0f;
  }
  for (int p0 = 0; p0 < n_parts; p0 += cap) {
    const int np = min(cap, n_parts - p0);
    load(st, src + size_t(p0) * pf, np * pf * 4);
#pragma unroll
    for (int i = 0; i < kItems; i++) {
      const int item = tid + i * nthreads, r = item / (D / 8), d0 = item % (D / 8) * 8;
      if (item >= G * (D / 8)) continue;
      for (int j = 0; j < np; j++) {
        const float* fp = st + size_t(j) * pf + size_t(r) * (D + 2);
        float2 x[4];
#pragma unroll
        for (int k = 0; k < 4; k++) x[k] = reinterpret_cast<const float2*>(fp + d0)[k];
        merge_partial(m[i], l[i], acc[i], *reinterpret_cast<const float2*>(fp + D), x);
      }
    }
    if (p0 + cap < n_parts) sync();  // the merges read `stage` before the next round
  }
#pragma unroll
  for (int i = 0; i < kItems; i++) {
    const int item = tid + i * nthreads;
    if (item < G * (D / 8))
      write_row_total<D>(a, hkv, slot, item / (D / 8), item % (D / 8) * 8, l[i], acc[i]);
  }
  return true;
}

// fold_staged with every thread's 16-byte cp.async copies in flight together: one L2 round trip
// a round instead of one per kBatch partitions (at batch 1, ctx 6,300, the 25-partition fold took
// ~6 us of a layer's ~16 between the qkv GEMV and the o GEMV).
template <int D, int kItems, class Sync>
__device__ __forceinline__ bool combine_partitions_staged(const AttentionArgs& a, int tile, int hkv,
                                                          int n_parts, int slot, int tid,
                                                          int nthreads, void* stage,
                                                          int stage_bytes, Sync&& sync) {
  auto load = [&](float* dst, const float* from, int bytes) {
    for (int j = tid; j < bytes / 16; j += nthreads)
      cp_async16_bytes(dst + 4 * j, from + 4 * j, 16);
    cp_async_commit();
    cp_async_wait<0>();
    sync();
  };
  return fold_staged<D, kItems>(a, tile, hkv, n_parts, slot, tid, nthreads, stage, stage_bytes,
                                load, sync);
}

// The decode kernel's fold spread over the (tile, kv head)'s active blocks, for grids whose
// blocks are all resident at once (AttentionArgs::spread_fold): after every block counted its
// partial in, block `who` of n_active folds items [who * per, who * per + per) of the G * D / 8
// (row, 8 dims) items, the same merges in the same order as combine_partitions (the same bits).
// Its items' partials (acc[d0 .. d0 + 8), m, l of every partition) come to shared memory by
// L2 loads all in flight together (one round trip; the last block alone copied 52.8 KB of 25
// partials in ~2.4 us at batch 1, ctx 6,300), then a thread an item merges them. Called by
// every thread of the block; stage: n_parts * ceil(G * D / 8 / n_active) * 10 floats.
template <int D>
__device__ __forceinline__ void fold_spread(const AttentionArgs& a, int tile, int hkv, int n_parts,
                                            int slot, int who, int n_active, int tid, int nthreads,
                                            float* stage) {
  const int G = a.heads / a.kv_heads;
  const int items = G * (D / 8), per = (items + n_active - 1) / n_active;
  const int i0 = who * per, ni = max(0, min(per, items - i0));
  if (ni == 0) return;  // (the same on every thread of the block)
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);
  const float* src = a.mma_partial + (size_t(tile) * a.kv_heads + hkv) * max_parts * G * (D + 2);
  for (int t = tid; t < ni * n_parts; t += nthreads) {  // t = (item i, partition j)
    const int i = t / n_parts, j = t % n_parts, item = i0 + i;
    const int r = item / (D / 8), d0 = item % (D / 8) * 8;
    const float* f = src + (size_t(j) * G + r) * (D + 2);
    float2* st = reinterpret_cast<float2*>(stage + size_t(t) * 10);  // acc[8], m, l
#pragma unroll
    for (int k = 0; k < 4; k++) st[k] = __ldcg(reinterpret_cast<const float2*>(f + d0) + k);
    st[4] = __ldcg(reinterpret_cast<const float2*>(f + D));
  }
  __syncthreads();
  if (tid >= ni) return;
  float m = -INFINITY, l = 0.0f, acc[8];
#pragma unroll
  for (int k = 0; k < 8; k++) acc[k] = 0.0f;
  for (int j = 0; j < n_parts; j++) {
    const float2* st = reinterpret_cast<const float2*>(stage + (size_t(tid) * n_parts + j) * 10);
    const float2 x[4] = {st[0], st[1], st[2], st[3]};
    merge_partial(m, l, acc, st[4], x);
  }
  const int item = i0 + tid;
  write_row_total<D>(a, hkv, slot, item / (D / 8), item % (D / 8) * 8, l, acc);
}

// Dynamic shared memory above 48 KB needs the attribute: set when `bytes` differs from what
// was set last (`set`, the caller's per-kernel record; 0 before the first launch).
template <class K>
Status allow_smem(K* kernel, int bytes, int& set, const char* name) {
  if (bytes == set) return Status::good();
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess)
    return Status::bad(cat(name, ": cudaFuncSetAttribute: ", cudaGetErrorString(e)));
  set = bytes;
  return Status::good();
}

// An attribute of the current device (fallback where the query fails).
inline int device_attribute(cudaDeviceAttr attr, int fallback) {
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess)
    return fallback;
  return v;
}
inline int device_sms() {
  static const int v = device_attribute(cudaDevAttrMultiProcessorCount, 132);
  return v;
}
// Shared memory of an SM, and what the device reserves of it for each resident block.
inline int smem_per_sm_bytes() {
  static const int v = device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0);
  return v;
}
inline int smem_reserved_bytes() {
  static const int v = device_attribute(cudaDevAttrReservedSharedMemoryPerBlock, 0);
  return v;
}
// A block's shared memory request, `bytes` padded so that at most `cap` blocks are resident an
// SM (cap 0: unpadded).
inline int smem_for_blocks_per_sm(int bytes, int cap) {
  if (cap <= 0) return bytes;
  const int over = smem_per_sm_bytes() / (cap + 1) - smem_reserved_bytes() + 1;
  return std::max(bytes, (over + 15) / 16 * 16);
}

}  // namespace loom::gpu::mma_impl
