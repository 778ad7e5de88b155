// Tensor-core paged attention, bf16, batch invariant (issues #3, #4).
//
// One canonical arithmetic for a query row r (a (slot, query head) pair) at cache position p,
// which every kernel here computes exactly, so that a row's output bits depend only on its
// sequence's cache and p: not on the batch, the other rows of its mma tile, the grid or the
// prefill chunking.
//  - Keys are cut into tiles of kMmaTileKeys = 64 (tile t = keys [64t, 64t + 64)) and
//    partitions of kMmaPartTiles = 4 tiles.
//  - Tile partial (m, l, acc), fresh per tile (tile_partial): s = q.k by mma.sync m16n8k16
//    (bf16 in, fp32 accumulate, k-steps over d in order); s *= scale * log2(e); keys > p
//    masked to -inf; m = row max; p_j = 2^(s_j - m) (ex2.approx); l = fixed-order sum of the
//    fp32 p_j; acc = bf16(P) . V by mma (k-steps over keys in order).
//  - merge(A, B) (merge_weights / merge_value): m = max; a = 2^(mA - m) (0 for -inf), b alike;
//    l = lA a + lB b, acc = accA a + accB b, each product and sum rounded on its own
//    (__fmul_rn / __fadd_rn: no contraction differences between kernels).
//  - Partition result = E, merged in order with the partition's tiles t that have 64t <= p
//    (E = (-inf, 0, 0), the empty state; tiles past p are skipped, never merged).
//  - Row total = E merged in order with the partition results; out = bf16(acc / l).
// Deviation from the brief: every fold starts from E instead of "P = t0". merge(E, X) == X
// except that a -0 acc becomes +0; since every path starts from E the bits agree everywhere,
// and the kernels need no "first" flags.
//
// Two kernels (plus a combine):
//  - decode (every tile one slot; the CUDA-graph decode steps): grid (n_tiles, kv_heads, Z);
//    block z takes partitions z, z + Z, ... of its (sequence, kv head); warp w computes tile w of
//    the partition into shared memory, the block folds the 4 in order and writes the partition
//    result to mma_partial (one partition: the output itself). Z only spreads the work: the
//    bits do not depend on it. The partitions are folded in order by the last block to finish
//    (mma_counters) or by the combine kernel. With fuse_rope it also does rope_kv_write's work
//    for its slot (rotated q in registers; the new k, v to the cache), with the same bits.
//  - prefill / mixed (tiles of up to 4 x floor(16 / G) slots of one sequence): each warp owns
//    16 rows (floor(16 / G) slots x G heads) and walks tiles 0.. in order, K/V tiles shared by
//    the 4 warps through a cp.async double buffer; partition and total states in registers.
// mma rows: decode = the G heads of the slot (rows >= G zero); prefill = slot-major, head-minor.
// The assumption this rests on: an mma output element depends only on its own A row and B
// column (no cross-row effects), which tests/cuda/test_attention.cpp checks bitwise.
#include <algorithm>
#include <cfloat>

#include "kernels/attention.cuh"
#include "kernels/common.cuh"
#include "kernels/rope.cuh"

namespace loom::gpu {

namespace {

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
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
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

// c += a . b for one m16n8k16 tile. Fragments (g = lane / 4, i = lane % 4):
// a0 (row g, k 2i..2i+1), a1 (row g+8, same k), a2 (row g, k 2i+8..), a3 (row g+8, k 2i+8..);
// b0 (k 2i..2i+1, col g), b1 (k 2i+8.., col g); c0 c1 (row g, cols 2i, 2i+1), c2 c3 (row g+8).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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
// never a stale NaN). Threads tid, tid + nthreads, ... take the 16-byte chunks.
template <int D>
__device__ __forceinline__ void load_tile(const bf16* kc, const bf16* vc, const int32_t* bt,
                                          int block_size, size_t kv_row, int hkv, int key0,
                                          int n_keys, bf16* ks, bf16* vs, int tid, int nthreads) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per key row of one head
  for (int i = tid; i < kMmaTileKeys * kChunks; i += nthreads) {
    const int kk = i / kChunks, c = i % kChunks;
    const int key = key0 + kk;
    const bool valid = key < n_keys;
    size_t src = 0;
    if (valid) {
      const int phys = bt[key / block_size];
      src = (size_t(phys) * block_size + key % block_size) * kv_row + size_t(hkv) * D + c * 8;
    }
    const int dst = kk * MmaTile<D>::kStride + c * 8;
    cp_async16(ks + dst, kc + src, valid);
    cp_async16(vs + dst, vc + src, valid);
  }
}

// The tile partial of keys [key0, key0 + 64) (in ks / vs) for the warp's 16 rows; p_lo / p_hi
// are the positions of rows g and g + 8 (-1: padding row, everything masked).
template <int D>
__device__ __forceinline__ void tile_partial(const uint32_t (&qa)[D / 16][4], const bf16* ks,
                                             const bf16* vs, int key0, int p_lo, int p_hi, int lane,
                                             RowState<D>& t) {
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
  constexpr float kScale = scale_log2<D>();
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int key = key0 + n * 8 + tig * 2 + (e & 1);
      const int p = e < 2 ? p_lo : p_hi;
      s[n][e] = key <= p ? __fmul_rn(s[n][e], kScale) : -INFINITY;
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
// order, written as the output (threads over (row, dim)). The combine kernel and the decode
// kernel's last block both run this.
template <int D>
__device__ __forceinline__ void combine_partitions(const AttentionArgs& a, int tile, int hkv,
                                                   int n_parts, int slot, int tid) {
  const int G = a.heads / a.kv_heads;
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);
  const size_t part_stride = size_t(G) * (D + 2);
  for (int i = tid; i < G * D; i += kThreads) {
    const int r = i / D, d = i % D;
    const float* f =
        a.mma_partial + ((size_t(tile) * a.kv_heads + hkv) * max_parts * G + r) * (D + 2);
    float m = -INFINITY, l = 0.0f, acc = 0.0f;
#pragma unroll 4
    for (int part = 0; part < n_parts; part++, f += part_stride) {
      // __ldcg: L2, never a stale L1 line (other blocks wrote these)
      const MergeWeights mw = merge_weights(m, __ldcg(f + D));
      l = merge_value(l, __ldcg(f + D + 1), mw);
      acc = merge_value(acc, __ldcg(f + d), mw);
      m = mw.m;
    }
    static_cast<bf16*>(a.out)[size_t(slot) * a.heads * D + size_t(hkv * G + r) * D + d] =
        __float2bfloat16_rn(__fdiv_rn(acc, l));
  }
}

// ---- kernels -------------------------------------------------------------------------------

// Decode: see the file comment. Shared memory: per warp a K and a V tile; after its tile the
// warp writes (acc rows < G, m, l) over its K tile for the block's fold.
template <int D>
__global__ void __launch_bounds__(kThreads) paged_attention_mma_decode_kernel(AttentionArgs a) {
  using Tl = MmaTile<D>;
  extern __shared__ uint4 mma_smem[];
  pdl_trigger();
  pdl_wait();  // qkv and the cache come from the previous kernels
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tile = blockIdx.x, hkv = blockIdx.y;
  const int seq = a.tiles[tile * 3], j0 = a.tiles[tile * 3 + 1];
  const int G = a.heads / a.kv_heads;
  const int p = a.kv_len[seq] + j0;  // the slot's position: keys [0, p]
  const int n_parts = p / kMmaPartKeys + 1;
  if (int(blockIdx.z) >= n_parts) return;
  const int slot = a.slot_start[seq] + j0;
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);

  bf16* smem = reinterpret_cast<bf16*>(mma_smem);
  bf16* ks = smem + size_t(warp) * 2 * Tl::kElems;
  bf16* vs = ks + Tl::kElems;
  float* fold = reinterpret_cast<float*>(ks);  // [16][D] acc, [16] m, [16] l

  const bf16* qkv = static_cast<const bf16*>(a.qkv);
  const bf16* q0 = qkv + size_t(slot) * (a.heads + 2 * a.kv_heads) * D + size_t(hkv) * G * D;
  const int g = lane >> 2, tig = lane & 3;
  uint32_t qa[D / 16][4];
  const bf16* q_lo = g < G ? q0 + g * D : nullptr;
  const bf16* q_hi = g + 8 < G ? q0 + (g + 8) * D : nullptr;
  const float pos = a.fuse_rope ? float(a.positions[slot]) : 0.0f;
  if (a.fuse_rope)
    load_q_rope<D>(q_lo, q_hi, pos, a.inv_freq, lane, qa);
  else
    load_q<D>(q_lo, q_hi, lane, qa);
  const int p_lo = g < G ? p : -1, p_hi = g + 8 < G ? p : -1;

  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const int32_t* bt = a.block_tables + size_t(seq) * a.bt_stride;
  const size_t kv_row = size_t(a.kv_heads) * D;

  for (int part = blockIdx.z; part < n_parts; part += gridDim.z) {
    const int key0 = (part * kMmaPartTiles + warp) * kMmaTileKeys;
    if (key0 <= p) {
      // fuse_rope: key p is not in the cache yet; this warp (the one whose tile holds p)
      // rotates it, writes it and the new v to the cache and into its tile.
      const bool new_key = a.fuse_rope && p < key0 + kMmaTileKeys;
      load_tile<D>(kc, vc, bt, a.block_size, kv_row, hkv, key0, new_key ? p : p + 1, ks, vs, lane,
                   32);
      cp_async_commit();
      cp_async_wait<0>();  // (also: key p's zero fill has landed before it is overwritten)
      if (new_key) {
        constexpr int kHalf = D / 2;
        const bf16* row = qkv + size_t(slot) * (a.heads + 2 * a.kv_heads) * D;
        const bf16* kq = row + size_t(a.heads + hkv) * D;
        const bf16* vq = row + size_t(a.heads + a.kv_heads + hkv) * D;
        const int cs = a.cache_slot[slot];
        bf16* kw = static_cast<bf16*>(const_cast<void*>(a.k_cache)) + size_t(cs) * kv_row +
                   size_t(hkv) * D;
        bf16* vw = static_cast<bf16*>(const_cast<void*>(a.v_cache)) + size_t(cs) * kv_row +
                   size_t(hkv) * D;
        bf16* kt = ks + (p - key0) * Tl::kStride;
        bf16* vt = vs + (p - key0) * Tl::kStride;
        for (int j = lane; j < kHalf; j += 32) {
          float y0, y1;
          rope_pair(__bfloat162float(kq[j]), __bfloat162float(kq[j + kHalf]), pos, a.inv_freq[j],
                    y0, y1);
          const bf16 b0 = __float2bfloat16_rn(y0), b1 = __float2bfloat16_rn(y1);
          kt[j] = b0;
          kt[j + kHalf] = b1;
          if (cs >= 0) kw[j] = b0, kw[j + kHalf] = b1;
        }
        for (int j = lane; j < D; j += 32) {
          vt[j] = vq[j];
          if (cs >= 0) vw[j] = vq[j];
        }
      }
      __syncwarp();
      RowState<D> t;
      tile_partial<D>(qa, ks, vs, key0, p_lo, p_hi, lane, t);
      __syncwarp();  // every lane's ldmatrix reads of ks are done before the fold area is written
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = g + 8 * h;
        if (r < G) {
#pragma unroll
          for (int i = 0; i < D / 8; i++) {
            fold[r * D + i * 8 + tig * 2] = t.acc[i][2 * h];
            fold[r * D + i * 8 + tig * 2 + 1] = t.acc[i][2 * h + 1];
          }
          if (tig == 0) {
            fold[16 * D + r] = t.m[h];
            fold[16 * D + 16 + r] = t.l[h];
          }
        }
      }
    }
    __syncthreads();
    // Fold the partition's tiles in order: thread per (row, dim); every thread of a row
    // computes the same m, l.
    for (int i = tid; i < G * D; i += kThreads) {
      const int r = i / D, d = i % D;
      float m = -INFINITY, l = 0.0f, acc = 0.0f;
      for (int w = 0; w < kMmaPartTiles; w++) {
        if ((part * kMmaPartTiles + w) * kMmaTileKeys > p) break;
        const float* f = reinterpret_cast<const float*>(smem + size_t(w) * 2 * Tl::kElems);
        const MergeWeights mw = merge_weights(m, f[16 * D + r]);
        l = merge_value(l, f[16 * D + 16 + r], mw);
        acc = merge_value(acc, f[r * D + d], mw);
        m = mw.m;
      }
      if (n_parts == 1) {  // the row total = merge(E, this partition): write the output
        const MergeWeights mw = merge_weights(-INFINITY, m);
        const float lt = merge_value(0.0f, l, mw), at = merge_value(0.0f, acc, mw);
        static_cast<bf16*>(a.out)[size_t(slot) * a.heads * D + size_t(hkv * G + r) * D + d] =
            __float2bfloat16_rn(__fdiv_rn(at, lt));
      } else {
        float* dst = a.mma_partial +
                     ((((size_t(tile) * a.kv_heads + hkv) * max_parts + part) * G + r) * (D + 2));
        dst[d] = acc;
        if (d == 0) {
          dst[D] = m;
          dst[D + 1] = l;
        }
      }
    }
    __syncthreads();  // the fold area is read before the next partition's loads overwrite it
  }
  if (n_parts > 1 && a.mma_counters != nullptr) {
    // The last of the (tile, kv head)'s active blocks folds the partitions (threadfence
    // reduction: partials written, fence, count; the last one fences and reads them).
    __shared__ int is_last;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      const int n_active = min(int(gridDim.z), n_parts);
      int* counter = a.mma_counters + size_t(tile) * a.kv_heads + hkv;
      is_last = atomicAdd(counter, 1) == n_active - 1;
      if (is_last) *counter = 0;  // every other block has counted: ready for the next call
    }
    __syncthreads();
    if (is_last) {
      __threadfence();
      combine_partitions<D>(a, tile, hkv, n_parts, slot, tid);
    }
  }
}

// Folds the partitions 0..n-1 of one (tile, kv head) in order (threads over (row, dim)).
template <int D>
__global__ void __launch_bounds__(kThreads) attention_mma_combine_kernel(AttentionArgs a) {
  pdl_trigger();
  pdl_wait();  // every block waits, so that this grid completes only after the decode kernel
  const int tile = blockIdx.x, hkv = blockIdx.y;
  const int seq = a.tiles[tile * 3], j0 = a.tiles[tile * 3 + 1];
  const int p = a.kv_len[seq] + j0;
  const int n_parts = p / kMmaPartKeys + 1;
  if (n_parts == 1) return;  // the decode kernel wrote the output
  combine_partitions<D>(a, tile, hkv, n_parts, a.slot_start[seq] + j0, threadIdx.x);
}

// Prefill / mixed: see the file comment. Shared memory: two (K, V) tile pairs.
template <int D>
__global__ void __launch_bounds__(kThreads) paged_attention_mma_kernel(AttentionArgs a) {
  using Tl = MmaTile<D>;
  extern __shared__ uint4 mma_smem[];
  pdl_trigger();
  pdl_wait();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // Last tiles first: a chunk's later slots see the most keys, so the longest blocks start
  // in the first wave instead of making a tail (the bits do not depend on the order).
  const int tile = a.n_tiles - 1 - int(blockIdx.x), hkv = blockIdx.y;
  const int seq = a.tiles[tile * 3], j0 = a.tiles[tile * 3 + 1], nj = a.tiles[tile * 3 + 2];
  const int G = a.heads / a.kv_heads;
  const int spw = 16 / G;             // slots per warp
  const int p0 = a.kv_len[seq] + j0;  // position of the tile's first slot
  const int n_keys = p0 + nj;         // keys [0, p0 + nj - 1] are seen (all in the cache)
  const int n_t = (n_keys - 1) / kMmaTileKeys + 1;
  const int slot0 = a.slot_start[seq] + j0;
  const int g = lane >> 2, tig = lane & 3;
  const int jw = warp * spw;  // the warp's first slot in the tile
  auto row_slot = [&](int r) { return r < spw * G && jw + r / G < nj ? jw + r / G : -1; };
  const int j_lo = row_slot(g), j_hi = row_slot(g + 8);
  const int p_lo = j_lo >= 0 ? p0 + j_lo : -1, p_hi = j_hi >= 0 ? p0 + j_hi : -1;
  const int warp_p = jw < nj ? p0 + min(nj, jw + spw) - 1 : -1;

  const bf16* qkv = static_cast<const bf16*>(a.qkv);
  const size_t q_stride = size_t(a.heads + 2 * a.kv_heads) * D;
  auto q_row = [&](int j, int r) -> const bf16* {
    if (j < 0) return nullptr;
    return qkv + size_t(slot0 + j) * q_stride + size_t(hkv * G + r % G) * D;
  };
  uint32_t qa[D / 16][4];
  load_q<D>(q_row(j_lo, g), q_row(j_hi, g + 8), lane, qa);

  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const int32_t* bt = a.block_tables + size_t(seq) * a.bt_stride;
  const size_t kv_row = size_t(a.kv_heads) * D;
  bf16* smem = reinterpret_cast<bf16*>(mma_smem);
  auto k_buf = [&](int t) { return smem + size_t(t & 1) * 2 * Tl::kElems; };

  RowState<D> total, part;
  total.clear();
  part.clear();
  load_tile<D>(kc, vc, bt, a.block_size, kv_row, hkv, 0, n_keys, k_buf(0), k_buf(0) + Tl::kElems,
               tid, kThreads);
  cp_async_commit();
  for (int t = 0; t < n_t; t++) {
    if (t + 1 < n_t) {
      bf16* nk = k_buf(t + 1);
      load_tile<D>(kc, vc, bt, a.block_size, kv_row, hkv, (t + 1) * kMmaTileKeys, n_keys, nk,
                   nk + Tl::kElems, tid, kThreads);
      cp_async_commit();
      cp_async_wait<1>();  // tile t has landed (this thread's copies)
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // ... and everyone's
    const int key0 = t * kMmaTileKeys;
    if (key0 <= warp_p) {
      RowState<D> tp;
      tile_partial<D>(qa, k_buf(t), k_buf(t) + Tl::kElems, key0, p_lo, p_hi, lane, tp);
#pragma unroll
      for (int h = 0; h < 2; h++)
        if (key0 <= (h ? p_hi : p_lo)) merge_row(part, tp, h);
    }
    if (t % kMmaPartTiles == kMmaPartTiles - 1 || t == n_t - 1) {
      const int part_key0 = (t / kMmaPartTiles) * kMmaPartKeys;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        if (part_key0 <= (h ? p_hi : p_lo)) merge_row(total, part, h);
        part.m[h] = -INFINITY;
        part.l[h] = 0.0f;
#pragma unroll
        for (int i = 0; i < D / 8; i++) part.acc[i][2 * h] = part.acc[i][2 * h + 1] = 0.0f;
      }
    }
    __syncthreads();  // tile t's buffer is read before tile t + 2's loads overwrite it
  }
  bf16* out = static_cast<bf16*>(a.out);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int j = h ? j_hi : j_lo;
    if (j < 0) continue;
    const int r = g + 8 * h;
    bf16* o = out + size_t(slot0 + j) * a.heads * D + size_t(hkv * G + r % G) * D;
#pragma unroll
    for (int i = 0; i < D / 8; i++) {
      const float x = __fdiv_rn(total.acc[i][2 * h], total.l[h]);
      const float y = __fdiv_rn(total.acc[i][2 * h + 1], total.l[h]);
      *reinterpret_cast<__nv_bfloat162*>(o + i * 8 + tig * 2) = __floats2bfloat162_rn(x, y);
    }
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

int device_sms() {
  static int sms = 0;
  if (sms == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      sms = 132;
  }
  return sms;
}

template <int D>
Status launch_mma(const AttentionArgs& a, cudaStream_t stream) {
  using Tl = MmaTile<D>;
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);
  const size_t need =
      attention_mma_partial_floats(a.n_tiles, a.kv_heads, a.heads, D, a.bt_stride, a.block_size);
  // The decode kernel needs its partitions' workspace (unless one partition is all there can
  // be); without it the prefill kernel computes the same bits.
  const bool decode =
      a.decode && (max_parts == 1 || (a.mma_partial != nullptr && a.mma_partial_floats >= need));
  cudaError_t e;
  if (a.fuse_rope && !decode) {
    // The prefill kernel has no RoPE inside: rope_kv_write first (decode: one slot per tile,
    // slots 0 .. n_tiles - 1), the same bits as the fused path.
    RopeKvArgs r;
    r.t = a.t;
    r.qkv = const_cast<void*>(a.qkv);
    r.positions = a.positions;
    r.cache_slot = a.cache_slot;
    r.inv_freq = a.inv_freq;
    r.n_slots = a.n_tiles;
    r.heads = a.heads;
    r.kv_heads = a.kv_heads;
    r.head_dim = D;
    r.k_cache = const_cast<void*>(a.k_cache);
    r.v_cache = const_cast<void*>(a.v_cache);
    r.pdl = a.pdl;
    const Status st = rope_kv_write(r, stream);
    if (!st.ok) return st;
  }
  if (decode) {
    static bool done = false;
    const int bytes = kMmaWarps * Tl::kPairBytes;
    Status st =
        allow_smem(paged_attention_mma_decode_kernel<D>, bytes, done, "paged_attention_mma_decode");
    if (!st.ok) return st;
    // Blocks per (tile, kv head): about 8 blocks per SM in all (3 are resident at a time:
    // 72 KB of shared memory each at D = 64; more, shorter blocks balance the waves), at most
    // the partitions. Only the speed depends on it, never the bits.
    const int pairs = a.n_tiles * a.kv_heads;
    const int z = std::max(1, std::min(max_parts, (8 * device_sms() + pairs - 1) / pairs));
    // Counters for the in-kernel combine, if there are enough; else the combine kernel.
    const bool counters =
        a.mma_counters != nullptr && a.mma_counters_len >= size_t(a.n_tiles) * a.kv_heads;
    AttentionArgs k = a;
    if (!counters) k.mma_counters = nullptr;
    e = launch_kernel(paged_attention_mma_decode_kernel<D>, dim3(a.n_tiles, a.kv_heads, z),
                      kThreads, bytes, stream, a.pdl, k);
    if (e != cudaSuccess)
      return Status::bad(cat("paged_attention_mma_decode: launch: ", cudaGetErrorString(e)));
    st = launch_status("paged_attention_mma_decode");
    if (!st.ok || max_parts == 1 || counters) return st;
    e = launch_kernel(attention_mma_combine_kernel<D>, dim3(a.n_tiles, a.kv_heads), kThreads, 0,
                      stream, a.pdl, a);
    if (e != cudaSuccess)
      return Status::bad(cat("attention_mma_combine: launch: ", cudaGetErrorString(e)));
    return launch_status("attention_mma_combine");
  }
  static bool done = false;
  const int bytes = 2 * Tl::kPairBytes;
  Status st = allow_smem(paged_attention_mma_kernel<D>, bytes, done, "paged_attention_mma");
  if (!st.ok) return st;
  e = launch_kernel(paged_attention_mma_kernel<D>, dim3(a.n_tiles, a.kv_heads), kThreads, bytes,
                    stream, a.pdl, a);
  if (e != cudaSuccess)
    return Status::bad(cat("paged_attention_mma: launch: ", cudaGetErrorString(e)));
  return launch_status("paged_attention_mma");
}

}  // namespace

Status paged_attention_mma(const AttentionArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(attention_mma_supported(a.t, a.heads, a.kv_heads, a.head_dim),
                 "paged_attention_mma: dtype ", dtype_name(a.t), ", heads ", a.heads, ", kv_heads ",
                 a.kv_heads, ", head_dim ", a.head_dim,
                 " (built for bf16, head_dim 16 or 64, GQA ratio up to 16)");
  LOOM_ARG_CHECK(a.block_size > 0 && a.bt_stride > 0 && a.n_tiles >= 0,
                 "paged_attention_mma: block_size ", a.block_size, ", bt_stride ", a.bt_stride);
  LOOM_ARG_CHECK(a.qkv && a.k_cache && a.v_cache && a.block_tables && a.kv_len && a.slot_start &&
                     a.tiles && a.out,
                 "paged_attention_mma: null pointer");
  LOOM_ARG_CHECK(!a.fuse_rope || (a.decode && a.positions && a.cache_slot && a.inv_freq),
                 "paged_attention_mma: fuse_rope needs decode and positions, cache_slot, inv_freq");
  if (a.n_tiles == 0) return Status::good();
  return a.head_dim == 16 ? launch_mma<16>(a, stream) : launch_mma<64>(a, stream);
}

}  // namespace loom::gpu
