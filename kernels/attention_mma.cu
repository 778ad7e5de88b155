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
//    masked to -inf; m = row max; p_j = 2^(s_j - m) (ex2.approx); l = the fixed-order sum (tree8)
//    of the fp32 p_j; acc = bf16(P) . V by mma (k-steps over keys in order).
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
//  - split decode (every tile one slot; every decode batch): grid (n_tiles, kv_heads, Z);
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
// An FP8 cache (kv_fp8) runs the same structure on e4m3 tiles with tile_partial_f8
// (attention_mma.cuh: f16 mma on fragments taken straight from the e4m3 tiles); the K scale is
// folded into the softmax scale, the V scale into the output; with fuse_rope the decode kernels
// quantize the new key and value as rope_kv_write does (attention_rope.cuh).
#include <type_traits>

#include "kernels/attention_rope.cuh"
#include "kernels/rope.cuh"

namespace loom::gpu {

using namespace mma_impl;

namespace {

// ---- kernels -------------------------------------------------------------------------------

// Decode: see the file comment. Shared memory: per warp a K and a V tile; after its tile the
// warp writes (acc rows < G, m, l) over its K tile for the block's fold.
// Before griddepcontrol.wait the block reads only the step's inputs (tiles, kv_len,
// slot_start, block tables: uploaded before the step's first kernel) and the cached keys <
// kv_len (written by earlier steps): its first tile streams in while the previous kernel (the
// qkv GEMV, or rope_kv_write) finishes. q and the keys from kv_len (p alone, unless the slot is
// one of a chunk's) come from that kernel: after the wait.
template <int D, bool F8>
__global__ void __launch_bounds__(kThreads) paged_attention_mma_decode_kernel(AttentionArgs a) {
  using Tl = TileOf<D, F8>;
  extern __shared__ uint4 mma_smem[];
  pdl_trigger();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tile = blockIdx.x, hkv = blockIdx.y;
  // The loads before the first K/V copies run under the qkv GEMV's stream, each a long
  // latency: with fuse_rope tile i is sequence i's one slot (AttentionArgs::fuse_rope), so no
  // tiles[] load, and the first tile's block-table entries are read beside kv_len, not after
  // it. The copies then wait for one load, not three in a chain (H200, b1 -0.4%, b2 -1.9%).
  const int seq = a.fuse_rope ? tile : a.tiles[tile * 3];
  const int j0 = a.fuse_rope ? 0 : a.tiles[tile * 3 + 1];
  const int G = a.heads / a.kv_heads;
  const int32_t* bt = a.block_tables + size_t(seq) * a.bt_stride;
  const int first_key0 = (int(blockIdx.z) * kMmaPartTiles + warp) * kMmaTileKeys;
  TileLoad<D, 32, F8> first;  // the warp's first tile
  first.read(bt, a.bt_stride, a.block_size, first_key0, lane);
  const int p = a.kv_len[seq] + j0;  // the slot's position: keys [0, p]
  const int n_parts = p / kMmaPartKeys + 1;
  // (Block z = 0 always stays and waits: the grid completes after the previous kernel.)
  if (int(blockIdx.z) >= n_parts) return;
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);

  char* smem = reinterpret_cast<char*>(mma_smem);
  char* ks = smem + size_t(warp) * Tl::kPairBytes;
  char* vs = ks + Tl::kTileBytes;
  float* fold = reinterpret_cast<float*>(ks);  // [16][D] acc, [16] m, [16] l

  const void* kc = a.k_cache;
  const void* vc = a.v_cache;
  const size_t kv_row = size_t(a.kv_heads) * D;
  // The warp's tile of partition `part`, all but key p (zero fill past p).
  auto issue = [&](int part) {
    const int key0 = (part * kMmaPartTiles + warp) * kMmaTileKeys;
    if (key0 > p) return;
    if (part == int(blockIdx.z))
      first.issue(kc, vc, a.block_size, kv_row, hkv, key0, p + 1, p, ks, vs, lane);
    else
      load_tile<D, 32, F8>(kc, vc, bt, a.bt_stride, a.block_size, kv_row, hkv, key0, p + 1, p, ks,
                           vs, lane);
  };
  const float k_scale = kv_scale_of(a.kv_scale, a.kv_heads, hkv, false);
  const float v_scale = kv_scale_of(a.kv_scale, a.kv_heads, hkv, true);
  const float scale = scale_log2<D>() * k_scale;
  // A slot after the first of its sequence's chunk (j0 > 0) also reads the chunk's earlier
  // keys, which the previous kernel writes: its first tile waits unless it ends before them.
  const bool early = j0 == 0 || first_key0 + kMmaTileKeys <= a.kv_len[seq];
  if (early) issue(blockIdx.z);
  // RoPE's cos and sin: of step inputs only, so before the wait (the position: one load).
  const int slot = a.fuse_rope ? tile : a.slot_start[seq] + j0;
  const float pos = a.fuse_rope ? float(a.positions[slot]) : 0.0f;
  RopeCs<D> rc;
  static_assert(D <= 64, "the new key's RoPE pairs: one a lane");
  float new_c = 0.0f, new_s = 0.0f;  // the new key's dims (lane, lane + D / 2)
  if (a.fuse_rope) rope_angles<D, F8>(pos, a.inv_freq, lane, rc, new_c, new_s);
  pdl_wait();  // qkv and cache row p come from the previous kernels
  if (!early) issue(blockIdx.z);

  const bf16* qkv = static_cast<const bf16*>(a.qkv);
  const bf16* q0 = qkv + size_t(slot) * (a.heads + 2 * a.kv_heads) * D + size_t(hkv) * G * D;
  const int g = lane >> 2, tig = lane & 3;
  uint32_t qa[D / 16][4];
  const bf16* q_lo = g < G ? q0 + g * D : nullptr;
  const bf16* q_hi = g + 8 < G ? q0 + (g + 8) * D : nullptr;
  load_q_decode<D, F8>(q_lo, q_hi, a.fuse_rope, rc, new_c, new_s, lane, qa);
  const int p_lo = g < G ? p : -1, p_hi = g + 8 < G ? p : -1;

  for (int part = blockIdx.z; part < n_parts; part += gridDim.z) {
    const int key0 = (part * kMmaPartTiles + warp) * kMmaTileKeys;
    if (part != int(blockIdx.z)) issue(part);
    if (key0 <= p) {
      // Key p (the new key) if this warp's tile holds it: from the cache, where rope_kv_write
      // put it, or (fuse_rope) rotated here, written to the cache and into the tile.
      const bool new_key = p < key0 + kMmaTileKeys;
      if (new_key && !a.fuse_rope)
        load_row<D, F8>(kc, vc, bt, a.block_size, kv_row, hkv, p, p - key0, ks, vs, lane);
      cp_async_commit();
      cp_async_wait<0>();
      if (new_key && a.fuse_rope) {
        using L = std::conditional_t<F8, PaddedF8<D>, PaddedBf16<D>>;
        using KV = std::conditional_t<F8, fp8_e4m3, bf16>;
        write_new_kv<D, L, KV>(a, qkv + size_t(slot) * (a.heads + 2 * a.kv_heads) * D, hkv,
                               a.cache_slot[slot], new_c, new_s, k_scale, v_scale, ks, vs, p - key0,
                               lane);
      }
      __syncwarp();
      RowState<D> t;
      if constexpr (F8)
        tile_partial_f8<D>(qa, ks, vs, key0, p_lo, p_hi, lane, scale, t);
      else
        tile_partial<D>(qa, ks, vs, key0, p_lo, p_hi, lane, scale, t);
      __syncwarp();  // every lane's ldmatrix reads of ks are done before the fold area is written
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = g + 8 * h;
        if (r < G) {
#pragma unroll
          for (int i = 0; i < D / 8; i++) {
            fold[r * D + acc_dim<F8>(i, tig, 0)] = t.acc[i][2 * h];
            fold[r * D + acc_dim<F8>(i, tig, 1)] = t.acc[i][2 * h + 1];
          }
          if (tig == 0) {
            fold[16 * D + r] = t.m[h];
            fold[16 * D + 16 + r] = t.l[h];
          }
        }
      }
    }
    __syncthreads();
    // Fold the partition's tiles in order: a thread per (row, 8 dims), merge_partial's merges
    // (one set of weights serves the 8 dims; the same values as per dim).
    for (int item = tid; item < G * (D / 8); item += kThreads) {
      const int r = item / (D / 8), d0 = item % (D / 8) * 8;
      float m = -INFINITY, l = 0.0f, acc[8];
#pragma unroll
      for (int k = 0; k < 8; k++) acc[k] = 0.0f;
#pragma unroll
      for (int w = 0; w < kMmaPartTiles; w++) {
        if ((part * kMmaPartTiles + w) * kMmaTileKeys > p) break;
        const float* f = reinterpret_cast<const float*>(smem + size_t(w) * Tl::kPairBytes);
        float2 x[4];
#pragma unroll
        for (int k = 0; k < 4; k++) x[k] = reinterpret_cast<const float2*>(f + r * D + d0)[k];
        merge_partial(m, l, acc, make_float2(f[16 * D + r], f[16 * D + 16 + r]), x);
      }
      if (n_parts == 1) {  // the row total = merge(E, this partition): write the output
        float mt = -INFINITY, lt = 0.0f, at[8];
        float2 x[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
          at[2 * k] = at[2 * k + 1] = 0.0f, x[k] = make_float2(acc[2 * k], acc[2 * k + 1]);
        merge_partial(mt, lt, at, make_float2(m, l), x);
        write_row_total<D>(a, hkv, slot, r, d0, lt, at);
      } else {
        float* dst = a.mma_partial +
                     ((((size_t(tile) * a.kv_heads + hkv) * max_parts + part) * G + r) * (D + 2));
#pragma unroll
        for (int k = 0; k < 4; k++)
          reinterpret_cast<float2*>(dst + d0)[k] = make_float2(acc[2 * k], acc[2 * k + 1]);
        if (d0 == 0) *reinterpret_cast<float2*>(dst + D) = make_float2(m, l);
      }
    }
    __syncthreads();  // the fold area is read before the next partition's loads overwrite it
  }
  if (n_parts > 1 && a.mma_counters != nullptr) {
    // The last of the (tile, kv head)'s active blocks folds the partitions (threadfence
    // reduction: partials written, a barrier, thread 0's acquire-release count; the last one's
    // barrier, then it reads them).
    __shared__ int is_last;
    __syncthreads();
    const int n_active = min(int(gridDim.z), n_parts);
    int* counter = a.mma_counters + size_t(tile) * a.kv_heads + hkv;
    if (a.spread_fold) {
      // Every active block counts in, waits for the others, folds its share of the items and
      // counts out; the last out sets the counter back to zero for the next call.
      if (tid == 0) {
        atomic_add_acq_rel_gpu(counter, 1);
        spin_until_count(counter, n_active);
      }
      __syncthreads();
      fold_spread<D>(a, tile, hkv, n_parts, slot, blockIdx.z, n_active, tid, kThreads,
                     reinterpret_cast<float*>(smem));
      __syncthreads();
      if (tid == 0 && atomicAdd(counter, 1) == 2 * n_active - 1) *counter = 0;
      return;
    }
    if (tid == 0) {
      is_last = atomic_add_acq_rel_gpu(counter, 1) == n_active - 1;
      if (is_last) *counter = 0;  // every other block has counted: ready for the next call
    }
    __syncthreads();
    if (is_last) {
      if (!combine_partitions_staged<D, 1>(a, tile, hkv, n_parts, slot, tid, kThreads, smem,
                                           kMmaWarps * Tl::kPairBytes, [] { __syncthreads(); }))
        combine_partitions<D>(a, tile, hkv, n_parts, slot, tid, kThreads);
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
  combine_partitions<D>(a, tile, hkv, n_parts, a.slot_start[seq] + j0, threadIdx.x, kThreads);
}

// Prefill / mixed: see the file comment. Shared memory: a ring of kStages (K, V) tile pairs,
// tiles t + 1 .. t + kStages - 1 in flight while tile t's products run. kMinBlocks: the blocks
// an SM ptxas is told to fit (0: its own choice; D = 64 takes 168 registers in bf16, 3 blocks an
// SM, and 176 in e4m3, 2 blocks; 3 holds e4m3 to 168 with 8 bytes of spills).
template <int D, bool F8, int kStages, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    paged_attention_mma_kernel(AttentionArgs a) {
  using Tl = TileOf<D, F8>;
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
  if constexpr (F8)
    load_q_f8<D>(q_row(j_lo, g), q_row(j_hi, g + 8), lane, qa);
  else
    load_q<D>(q_row(j_lo, g), q_row(j_hi, g + 8), lane, qa);

  const void* kc = a.k_cache;
  const void* vc = a.v_cache;
  const int32_t* bt = a.block_tables + size_t(seq) * a.bt_stride;
  const size_t kv_row = size_t(a.kv_heads) * D;
  const float scale = scale_log2<D>() * kv_scale_of(a.kv_scale, a.kv_heads, hkv, false);
  const float v_scale = kv_scale_of(a.kv_scale, a.kv_heads, hkv, true);
  char* smem = reinterpret_cast<char*>(mma_smem);
  auto k_buf = [&](int t) { return smem + size_t(t % kStages) * Tl::kPairBytes; };
  auto load = [&](int t) {  // tile t's copies into its ring slot, one commit group
    load_tile<D, kThreads, F8>(kc, vc, bt, a.bt_stride, a.block_size, kv_row, hkv, t * kMmaTileKeys,
                               n_keys, -1, k_buf(t), k_buf(t) + Tl::kTileBytes, tid);
    cp_async_commit();
  };

  RowState<D> total, part;
  total.clear();
  part.clear();
  for (int t = 0; t < kStages - 1 && t < n_t; t++) load(t);
  for (int t = 0; t < n_t; t++) {
    // Wait for tile t's copies (this thread's; the tiles after it may stay in flight). The tail
    // waits on what is left instead of committing empty groups to keep one wait: that form
    // took bf16 D = 64 at 3-4 stages from 168 registers to 210-213 (2 blocks an SM, not 3).
    if (t + kStages - 1 < n_t) {
      load(t + kStages - 1);  // into the slot tile t - 1 left (read before the last barrier)
      cp_async_wait<kStages - 1>();
    } else if (kStages > 2 && t + 2 == n_t) {
      cp_async_wait<1>();
    } else if (kStages > 3 && t + 3 == n_t) {
      cp_async_wait<2>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // ... and everyone's
    const int key0 = t * kMmaTileKeys;
    if (key0 <= warp_p) {
      RowState<D> tp;
      if constexpr (F8)
        tile_partial_f8<D>(qa, k_buf(t), k_buf(t) + Tl::kTileBytes, key0, p_lo, p_hi, lane, scale,
                           tp);
      else
        tile_partial<D>(qa, k_buf(t), k_buf(t) + Tl::kTileBytes, key0, p_lo, p_hi, lane, scale, tp);
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
    __syncthreads();  // tile t's slot is read before tile t + kStages's loads overwrite it
  }
  bf16* out = static_cast<bf16*>(a.out);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int j = h ? j_hi : j_lo;
    if (j < 0) continue;
    const int r = g + 8 * h;
    store_out_row<D, F8>(out + size_t(slot0 + j) * a.heads * D + size_t(hkv * G + r % G) * D, total,
                         h, tig, v_scale);
  }
}

// rope_kv_write for a fuse_rope launch of the prefill kernel: q and the new keys of slots 0 ..
// n_tiles - 1 rotated, the new K and V written to the cache; the kernel after it then runs with
// fuse_rope off.
Status rope_kv_write_for(const AttentionArgs& a, cudaStream_t stream) {
  RopeKvArgs r;
  r.t = a.t;
  r.qkv = const_cast<void*>(a.qkv);
  r.positions = a.positions;
  r.cache_slot = a.cache_slot;
  r.inv_freq = a.inv_freq;
  r.n_slots = a.n_tiles;
  r.heads = a.heads;
  r.kv_heads = a.kv_heads;
  r.head_dim = a.head_dim;
  r.k_cache = const_cast<void*>(a.k_cache);
  r.v_cache = const_cast<void*>(a.v_cache);
  r.kv_fp8 = a.kv_fp8;
  r.kv_scale = a.kv_scale;
  r.pdl = a.pdl;
  return rope_kv_write(r, stream);
}

template <int D, bool F8, int kStages, int kMinBlocks>
Status launch_prefill(const AttentionArgs& a, cudaStream_t stream) {
  static int set_bytes = 0;
  const int bytes = kStages * TileOf<D, F8>::kPairBytes;
  Status st = allow_smem(paged_attention_mma_kernel<D, F8, kStages, kMinBlocks>, bytes, set_bytes,
                         "paged_attention_mma");
  if (!st.ok) return st;
  const cudaError_t e =
      launch_kernel(paged_attention_mma_kernel<D, F8, kStages, kMinBlocks>,
                    dim3(a.n_tiles, a.kv_heads), kThreads, bytes, stream, a.pdl, a);
  if (e != cudaSuccess)
    return Status::bad(cat("paged_attention_mma: launch: ", cudaGetErrorString(e)));
  return launch_status("paged_attention_mma");
}

template <int D, bool F8, int kMinBlocks>
Status launch_prefill_depth(const AttentionArgs& a, cudaStream_t stream) {
  switch (a.prefill_stages) {
    case 2:
      return launch_prefill<D, F8, 2, kMinBlocks>(a, stream);
    case 3:
      return launch_prefill<D, F8, 3, kMinBlocks>(a, stream);
    case 4:
      return launch_prefill<D, F8, 4, kMinBlocks>(a, stream);
  }
  return Status::bad(
      cat("paged_attention_mma: prefill_stages ", a.prefill_stages, ": expected 2, 3 or 4"));
}

template <int D, bool F8>
Status launch_mma(const AttentionArgs& a_in, cudaStream_t stream) {
  using Tl = TileOf<D, F8>;
  AttentionArgs a = a_in;
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);
  const size_t need =
      attention_mma_partial_floats(a.n_tiles, a.kv_heads, a.heads, D, a.bt_stride, a.block_size);
  // The decode kernel needs its partitions' workspace (unless one partition is all there can
  // be); without it the prefill kernel computes the same bits.
  const bool decode =
      a.decode && (max_parts == 1 || (a.mma_partial != nullptr && a.mma_partial_floats >= need));
  // Decode: the split kernel (a block per (tile, kv head, partition group), RoPE fused), at
  // every batch (a persistent pipelined kernel, a warp per partition, was measured slower on
  // an H200 at every batch and removed: bench/NOTES-cuda.md).
  // The TMA pipeline decodes batches of at least kTmaMinPairs (tile, kv head) pairs where it
  // can run (without partials it takes whole sequences a warp; below a wave its tail is
  // chunked over the wave); the split kernel the smaller ones, whose latency it has less of.
  // H200, alone (L2 flushed), split vs TMA: b1 ctx 2000 13.5 vs 16.2 us, b4 ctx 4000 20.8 vs
  // 20.7, b8 ctx 4000 32.7 vs 25.5, b256 ctx 8000 659 vs 528 (FP8 489 vs 302). In the decode
  // step (rope_kv_write before it) the TMA kernel wins from fewer pairs than alone: loom bench,
  // 8 frames (contexts 1,746-6,336), s/frame split -> TMA: bf16 b1 0.737 -> 0.768, b2 0.839 ->
  // 0.858, b4 1.014 -> 0.930, b8 1.144 -> 1.035, b16 1.411 -> 1.190, b32 1.960 -> 1.449; FP8
  // b8 1.001 -> 1.011, b16 1.186 -> 1.157, b32 1.427 -> 1.340 (Terra: 4 pairs a sequence;
  // bench/results/2026-12-02-h200-s31-tma-decode-*.json). Asked for where it cannot run, the
  // TMA kernel says why.
  using DK = AttentionArgs::DecodeKernel;
  constexpr int kTmaMinPairs = F8 ? 64 : 16;
  const bool tma = a.decode && a.decode_kernel != DK::Split &&
                   (a.decode_kernel == DK::Tma ||
                    (a.n_tiles * a.kv_heads >= kTmaMinPairs && tma_decode_usable(a)));
  cudaError_t e;
  if (a.fuse_rope && !decode) {
    // The prefill kernel has no RoPE inside: rope_kv_write first (one slot per tile, slots 0 ..
    // n_tiles - 1), the same bits as the fused path.
    const Status st = rope_kv_write_for(a, stream);
    if (!st.ok) return st;
    a.fuse_rope = false;
  }
  if (tma) return paged_attention_tma_decode(a, stream);
  if (decode) {
    // Blocks per (tile, kv head), z. When every partition fits in one wave (3 blocks of 72 KB
    // are resident per SM at D = 64), a block per partition. Otherwise about 16 blocks per SM
    // in all (more, shorter blocks shorten the last wave's tail), with at least 2 partitions a
    // block. H200, ctx 8000: b256 690 -> 657 us, b64 205 -> 191 us against 8 blocks per SM;
    // one partition a block made b16 8 % slower. Only the speed depends on z, never the bits.
    const int pairs = a.n_tiles * a.kv_heads, sms = device_sms();
    int z = max_parts;
    if (pairs * max_parts > 3 * sms)
      z = std::min(ceil_div(16 * sms, pairs), ceil_div(max_parts, 2));
    z = std::max(1, std::min(max_parts, z));
    // A grid that fits one wave of split_blocks_per_sm blocks an SM is held to that many (the
    // shared memory request padded; see tma_blocks_per_sm): launched by PDL while the GEMV
    // before it frees SMs one by one, it would pile 3 blocks onto each. H200 bf16 decode step
    // at batch 1 (4 x 57 blocks), ctx 2000 / 8000 / 14000: 1.333 / 1.466 / 1.582 -> 1.316 /
    // 1.425 / 1.517 ms. Grids of several waves keep every slot: capped, b8-b32 at ctx 8000
    // were 3-8 % slower (bench/results/2026-11-28-h200-step-case-split-cap.json).
    const int cap = pairs * z <= a.split_blocks_per_sm * sms ? a.split_blocks_per_sm : 0;
    static int set_bytes = 0;
    const int bytes = smem_for_blocks_per_sm(kMmaWarps * Tl::kPairBytes, cap);
    Status st = allow_smem(paged_attention_mma_decode_kernel<D, F8>, bytes, set_bytes,
                           "paged_attention_mma_decode");
    if (!st.ok) return st;
    // Counters for the in-kernel combine, if there are enough; else the combine kernel.
    const bool counters =
        a.mma_counters != nullptr && a.mma_counters_len >= size_t(a.n_tiles) * a.kv_heads;
    AttentionArgs k = a;
    if (!counters) k.mma_counters = nullptr;
    // Every partition its own block and the grid one wave: the blocks are all resident at
    // once (PDL: the next kernel's blocks land only after every block here started), so they
    // can wait for each other and spread the fold.
    k.spread_fold = counters && z == max_parts && cap > 0;
    e = launch_kernel(paged_attention_mma_decode_kernel<D, F8>, dim3(a.n_tiles, a.kv_heads, z),
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
  if (a.prefill_blocks_per_sm == 3) return launch_prefill_depth<D, F8, 3>(a, stream);
  if (a.prefill_blocks_per_sm == 0) return launch_prefill_depth<D, F8, 0>(a, stream);
  return Status::bad(cat("paged_attention_mma: prefill_blocks_per_sm ", a.prefill_blocks_per_sm,
                         ": expected 0 or 3"));
}

}  // namespace

int paged_attention_mma_decode_block_registers() {
  return block_registers(
      reinterpret_cast<const void*>(paged_attention_mma_decode_kernel<64, false>), kThreads);
}

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
  if (a.kv_fp8)
    return a.head_dim == 16 ? launch_mma<16, true>(a, stream) : launch_mma<64, true>(a, stream);
  return a.head_dim == 16 ? launch_mma<16, false>(a, stream) : launch_mma<64, false>(a, stream);
}

}  // namespace loom::gpu
