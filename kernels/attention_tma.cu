// Decode attention streamed by the tensor-memory accelerator (issue 13 §3): the tensor-core
// decode of attention_mma.cu with its loads pipelined, for head_dim 64 (bf16 or FP8 cache).
//
// The arithmetic is attention_mma.cu's canonical one (64-key tile partials by tile_partial /
// tile_partial_f8, partitions of 4 tiles merged in order from E, the row total merged in order
// from the partitions), so a row's bits equal the split decode and the prefill kernels'.
//
// Work: a warp per (one-slot tile, kv head, chunk of consecutive partitions). A block's warps are
// independent: no __syncthreads, no shared-memory fold. Each warp streams its chunk's tiles
// through its own ring of kStages (K, V) tile pairs: one TMA box per (cache block, kv head) and
// tensor (block_size rows of 64 elements, up to 64 rows), completing on the stage's mbarrier,
// issued kStages tiles ahead of the one being computed, so the warp's reads stay in flight while
// it computes. Rows land in TMA's 64-byte (e4m3) or 128-byte (bf16) swizzle: the 8 rows of each
// ldmatrix on distinct banks, with no padding (Swizzle64 / Swizzle128 in attention_mma.cuh).
// The next tile's block-table entries are read one tile ahead, so no copy waits on them. A
// bf16 step whose sequences share cached blocks takes one stage a warp past one wave of the
// 2-stage blocks: twice the warps an SM (launch_tma_config), with K and V on their own barriers
// (the next tile's K copied during this tile's softmax and P V, its V during the next tile's
// scores; b256 groups of 8 sharing 1,746 keys, H200: ctx 8000 419.5 -> 411.3 us, ctx 12000
// 662.7 -> 642.8, ctx 3000 129.0 -> 128.7, bench/results/2026-12-02-h200-s23-tma-one-stage-
// split-kv.json). In such steps the whole pairs are staggered in classes of 8 tiles: class c
// takes c times as many partitions past its shared prefix as the prefix holds first, storing
// those partials and merging them last, so that while one class computes its prefix from L2 the
// others stream their own keys from HBM.
//
// A warp whose chunk is the whole sequence merges its partitions in registers and writes the
// output: at batch 256 every warp does (no partials written or read). Otherwise it writes each
// partition's (acc, m, l) to mma_partial and the last chunk of the (tile, kv head) to finish
// (mma_counters) folds them (combine_partitions). The chunks per sequence, z, are fixed at
// launch from the batch and the warps of 2 blocks an SM (a graph replays them for any context);
// each chunk takes ceil(n_parts / z) partitions of the context the step has. Past one wave of
// warps, the full waves' tiles are whole and only the tiles after them are chunked
// (tma_decode_split).
//
// Keys past p: the last tile's boxes past p are not copied and its V rows past p are zeroed
// (P = 0 there, and 0 · NaN would be NaN); its K rows past p may hold anything, their scores
// are masked. The step's new keys (p, or from kv_len for a slot of a chunk) come from
// rope_kv_write, the kernel before this one: tiles holding any are issued after
// griddepcontrol.wait, earlier tiles before it. With fuse_rope the
// kernel follows the qkv GEMV instead and does rope_kv_write's work (attention_rope.cuh): every
// tile is issued before the wait, and the warp whose tile holds key p overwrites that row, once
// it landed, with the rotated key and the value it also writes to the cache (one kernel and one
// PDL boundary fewer a layer; H200, loom bench 8 frames, two rounds, s/frame: b4 0.859 -> 0.847,
// b8 0.925 -> 0.901, b16 1.138 -> 1.108; bench/results/2026-12-03-h200-s38-tma-fused-rope-
// kept.json).
#include "kernels/attention_rope.cuh"
#include "kernels/attention_swap.cuh"
#include "kernels/tma.cuh"

namespace loom::gpu {

using namespace mma_impl;

namespace {

constexpr int kD = 64;

// Rows of 64 e4m3 (64 bytes, 64-byte swizzle) or 64 bf16 (128 bytes, 128-byte swizzle). L2
// promotion: a bf16 box (whole 128-byte rows) reads faster without it (b256 ctx 8000: H200 527
// → 489 us, 4.29 TB/s; the H100's 712 us either way); an e4m3 row is half a line of a slot row
// whose other half is another kv head's, read by the block's next warp, and 256-byte promotion
// wins there (H200 304 against 309 us without, H100 397 against 476).
template <bool F8>
struct TmaRows {
  using L = std::conditional_t<F8, Swizzle64, Swizzle128>;
  static constexpr int kBytes = F8 ? 64 : 128;
  static constexpr CUtensorMapSwizzle kSwizzle =
      F8 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B;
  static constexpr CUtensorMapL2promotion kPromotion =
      F8 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_NONE;
  static constexpr CUtensorMapDataType kType =
      F8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
};

// Shared memory of a block: per warp kStages (K tile, V tile) pairs, the block's kGroupSlots
// pairs (a group block's shared prefix, one-stage builds), then per warp kWarpBars mbarriers and
// the group slots' full and empty barriers; 1024 bytes of slack to align the rings (the
// swizzle repeats every 1024 bytes).
template <bool F8, int kStages, int kWarps>
struct TmaCfg {
  static constexpr int kTileBytes = kMmaTileKeys * TmaRows<F8>::kBytes;  // 4 KB e4m3, 8 KB bf16
  static constexpr int kPairBytes = 2 * kTileBytes;
  static constexpr int kWarpBytes = kStages * kPairBytes;
  static constexpr int kBars = kStages < 2 ? 2 : kStages;  // one stage: K and V apart
  static constexpr int kGroupSlots = kStages == 1 ? kTmaGroupSlots : 0;
  static constexpr int kWarpBars = kBars + 1;  // the stages' and the fold's (bars[kBars])
  static constexpr int kSmemBytes = kWarps * kWarpBytes + kGroupSlots * kPairBytes +
                                    (kWarps * kWarpBars + 2 * kGroupSlots) * 8 + 1024;
};

// The K and V pools of one layer as [cache_slots, kv_heads, 64] tensors.
struct TmaMaps {
  CUtensorMap k, v;
};

// Partition pi's G rows of (acc [kD], m, l) in mma_partial, for (tile, kv head).
__device__ __forceinline__ float* partition_rows(const AttentionArgs& a, int tile, int hkv, int pi,
                                                 int G) {
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);
  return a.mma_partial + ((size_t(tile) * a.kv_heads + hkv) * max_parts + pi) * G * (kD + 2);
}

// *at = x (kLoad: x = *at), and the float2 at `at` for two.
template <bool kLoad>
__device__ __forceinline__ void io1(float* at, float& x) {
  if constexpr (kLoad)
    x = *at;
  else
    *at = x;
}
template <bool kLoad>
__device__ __forceinline__ void io2(float* at, float& x, float& y) {
  if constexpr (kLoad) {
    const float2 v = *reinterpret_cast<const float2*>(at);
    x = v.x, y = v.y;
  } else {
    *reinterpret_cast<float2*>(at) = make_float2(x, y);
  }
}

// Partition pi's state of rows g, g + 8 to (kLoad: from) mma_partial [.., G, D + 2] (acc, m,
// l). A load reads back exactly what the store wrote (m and l come from the row's tig 0 lane:
// a __syncwarp between the two).
template <bool F8, bool kG8, bool kLoad>
__device__ __forceinline__ void partition_io(const AttentionArgs& a, RowState<kD>& part, int tile,
                                             int hkv, int pi, int G, int lane) {
  float* f = partition_rows(a, tile, hkv, pi, G);
  const int g = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int h = 0; h < (kG8 ? 1 : 2); h++) {
    const int r = g + 8 * h;
    if (r >= G) continue;
    float* row = f + r * (kD + 2);
#pragma unroll
    for (int i = 0; i < kD / 8; i++) {
      if constexpr (F8) {
        if (i & 1) continue;  // acc[i] and acc[i + 1] hold neighbouring dims (acc_dim)
#pragma unroll
        for (int e = 0; e < 2; e++)
          io2<kLoad>(row + acc_dim<true>(i, tig, e), part.acc[i][2 * h + e],
                     part.acc[i + 1][2 * h + e]);
      } else {
        io2<kLoad>(row + acc_dim<false>(i, tig, 0), part.acc[i][2 * h], part.acc[i][2 * h + 1]);
      }
    }
    if (kLoad || tig == 0) io2<kLoad>(row + kD, part.m[h], part.l[h]);
  }
}

// The same for the swapped tile's state: heads 2 tig + c, dims col_dim<F8>(db, g, half).
template <bool F8, bool kG8, bool kLoad>
__device__ __forceinline__ void partition_io(const AttentionArgs& a, ColState<kD>& part, int tile,
                                             int hkv, int pi, int G, int lane) {
  float* f = partition_rows(a, tile, hkv, pi, G);
  const int g = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int c = 0; c < 2; c++) {
    const int r = 2 * tig + c;
    if (r >= G) continue;
    float* row = f + r * (kD + 2);
#pragma unroll
    for (int db = 0; db < kD / 16; db++) {
      if constexpr (F8) {  // dims 2 g, 2 g + 1: neighbours
        io2<kLoad>(row + col_dim<F8>(db, g, 0), part.acc[db][c], part.acc[db][2 + c]);
      } else {
#pragma unroll
        for (int half = 0; half < 2; half++)
          io1<kLoad>(row + col_dim<F8>(db, g, half), part.acc[db][2 * half + c]);
      }
    }
    if (kLoad || g == 0) io2<kLoad>(row + kD, part.m[c], part.l[c]);
  }
}

// The row total's output rows (out: the slot's [heads, kD]): rows g (and g + 8) of a RowState,
// heads 2 tig + c of a ColState, each acc / l · v_scale (store_out_row's arithmetic).
template <bool F8, bool kG8>
__device__ __forceinline__ void store_total(bf16* out, const RowState<kD>& t, int hkv, int G,
                                            int lane, float v_scale) {
  const int g = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int h = 0; h < (kG8 ? 1 : 2); h++)
    if (g + 8 * h < G)
      store_out_row<kD, F8>(out + size_t(hkv * G + g + 8 * h) * kD, t, h, tig, v_scale);
}
template <bool F8, bool kG8>
__device__ __forceinline__ void store_total(bf16* out, const ColState<kD>& t, int hkv, int G,
                                            int lane, float v_scale) {
  const int g = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int c = 0; c < 2; c++) {
    if (2 * tig + c >= G) continue;
    bf16* o = out + size_t(hkv * G + 2 * tig + c) * kD;
#pragma unroll
    for (int db = 0; db < kD / 16; db++)
#pragma unroll
      for (int half = 0; half < 2; half++)
        o[col_dim<F8>(db, g, half)] =
            __float2bfloat16_rn(__fmul_rn(__fdiv_rn(t.acc[db][2 * half + c], t.l[c]), v_scale));
  }
}

// s = merge(s, t) for the rows (RowState: g, and g + 8 unless kG8) or heads (ColState: 2 tig
// + c) whose position pos[] reaches `first`, the first key t covers.
template <bool kG8>
__device__ __forceinline__ void merge_live(RowState<kD>& s, const RowState<kD>& t, int first,
                                           const int (&pos)[2]) {
#pragma unroll
  for (int h = 0; h < (kG8 ? 1 : 2); h++)
    if (first <= pos[h]) merge_row(s, t, h);
}
template <bool kG8>
__device__ __forceinline__ void merge_live(ColState<kD>& s, const ColState<kD>& t, int first,
                                           const int (&pos)[2]) {
#pragma unroll
  for (int c = 0; c < 2; c++)
    if (first <= pos[c]) merge_col(s, t, c);
}

// The leading blocks the block table bt of a tile (its last key p) has in common with that of
// tile `other` (a prefix of cached blocks the two sequences share), by the warp.
__device__ __forceinline__ int leading_shared_blocks(const AttentionArgs& a, const int32_t* bt,
                                                     int other, int p, int lane) {
  if (other >= a.n_tiles) return 0;
  const int os = a.tiles[other * 3], op = a.kv_len[os] + a.tiles[other * 3 + 1];
  const int32_t* obt = a.block_tables + size_t(os) * a.bt_stride;
  const int n = min(p, op) / a.block_size + 1;
  for (int j0 = 0; j0 < n; j0 += 32) {
    const int j = j0 + lane;
    const unsigned differ = __ballot_sync(0xffffffffu, j >= n || bt[j] != obt[j]);
    if (differ) return j0 + __ffs(int(differ)) - 1;
  }
  return n;
}

// kSwap: the swapped-operand tile (attention_swap.cuh; G <= 8 only).
template <bool F8, int kStages, int kWarps, bool kG8, bool kSwap = false>
__global__ void __launch_bounds__(kWarps * 32)
    paged_attention_tma_decode_kernel(const AttentionArgs a, const __grid_constant__ TmaMaps maps,
                                      const int whole_tiles, const int z_chunks, const int stagger,
                                      const bool group) {
  using C = TmaCfg<F8, kStages, kWarps>;
  using L = typename TmaRows<F8>::L;
  constexpr int kRowBytes = TmaRows<F8>::kBytes;
  extern __shared__ uint4 tma_smem[];
  pdl_trigger();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const uint32_t raw = smem_u32(tma_smem);
  char* base = reinterpret_cast<char*>(tma_smem) + ((1024u - (raw & 1023u)) & 1023u);
  char* ring = base + warp * C::kWarpBytes;
  char* group_ring = base + kWarps * C::kWarpBytes;
  uint64_t* bar0 = reinterpret_cast<uint64_t*>(group_ring + C::kGroupSlots * C::kPairBytes);
  uint64_t* bars = bar0 + warp * C::kWarpBars;
  uint64_t* full = bar0 + kWarps * C::kWarpBars;  // [kGroupSlots]: a group slot's tile landed
  uint64_t* empty = full + C::kGroupSlots;        // [kGroupSlots]: every warp read it
  constexpr int kSlots = C::kGroupSlots > 0 ? C::kGroupSlots : 1;  // (for % and / below)
  // One stage of the swapped tile: K and V on their own barriers, the next tile's K issued once
  // this tile's scores are in registers and its V once P V is done, so that each copy's latency
  // overlaps half a tile's arithmetic (one stage otherwise waits for the whole tile).
  constexpr bool kSplitKV = kStages == 1 && kSwap;
  // RoPE and the new key here (attention_rope.cuh).
  const bool fuse = a.fuse_rope;

  // The warp's work: (tile, kv head) whole for tiles < whole_tiles, then (tile, kv head, chunk
  // z) for the others, kv heads fastest. The chunked tiles' partials and counters are indexed
  // from the first of them (ptile).
  // A group block (every pair whole, one stage): tiles tile0 .. tile0 + kWarps - 1 of one kv
  // head, whose common prefix of cached blocks is read once into the block's group slots.
  const int item = int(blockIdx.x) * kWarps + warp, whole_items = whole_tiles * a.kv_heads;
  const bool chunked = !group && item >= whole_items;
  const int zc = chunked ? z_chunks : 1, rest_item = chunked ? item - whole_items : item;
  const int tile0 = int(blockIdx.x) / a.kv_heads * kWarps;
  const int hkv = group ? int(blockIdx.x) % a.kv_heads : rest_item % a.kv_heads;
  const int rest = rest_item / a.kv_heads;
  const int z = rest % zc, tile = group ? tile0 + warp : (chunked ? whole_tiles : 0) + rest / zc;
  const int ptile = tile - whole_tiles;
  int seq = 0, j0 = 0, p = -1, n_parts = 0, per = 1, part0 = 0, part1 = 0;
  if (tile < a.n_tiles) {
    seq = a.tiles[tile * 3];
    j0 = a.tiles[tile * 3 + 1];
    p = a.kv_len[seq] + j0;  // keys [0, p]
    n_parts = p / kMmaPartKeys + 1;
    per = (n_parts + zc - 1) / zc;
    part0 = z * per;
    part1 = min(n_parts, part0 + per);
  }
  // A group block's shared tiles 0 .. n_group - 1: whole tiles of old keys (before every
  // member's kv_len) in blocks all its members' tables hold, read once for the block.
  int n_group = 0;
  if constexpr (C::kGroupSlots > 0) {
    if (group) {
      __shared__ int group_tiles, group_warps;
      if (threadIdx.x == 0) group_tiles = INT_MAX, group_warps = 0;
      __syncthreads();
      if (tile < a.n_tiles && lane == 0) atomicAdd(&group_warps, 1);
      if (tile < a.n_tiles) {
        const int32_t* gbt = a.block_tables + size_t(seq) * a.bt_stride;
        const int lead = leading_shared_blocks(a, gbt, tile0, p, lane) * a.block_size;
        if (lane == 0) atomicMin(&group_tiles, min(lead, a.kv_len[seq]) / kMmaTileKeys);
      }
      __syncthreads();
      n_group = group_warps > 1 && group_tiles >= C::kGroupSlots ? group_tiles : 0;
      if (threadIdx.x == 0 && n_group > 0) {
        for (int s = 0; s < C::kGroupSlots; s++) {
          mbar_init(full + s, 1);
          mbar_init(empty + s, group_warps);
        }
        fence_mbar_init();
      }
      __syncthreads();
    }
  }
  if (part0 >= part1) {
    pdl_wait();  // (every block waits, so that the grid completes after the previous kernel)
    return;
  }
  const int t0 = part0 * kMmaPartTiles;
  const int n_t = min(part1 * kMmaPartTiles, p / kMmaTileKeys + 1) - t0;  // tiles 64 t <= p
  const bool whole = part0 == 0 && part1 == n_parts;
  const int bs = a.block_size, rows = min(bs, kMmaTileKeys), boxes = kMmaTileKeys / rows;
  const int32_t* bt = a.block_tables + size_t(seq) * a.bt_stride;
  // A staggered pair (see launch_tma) takes its last `rot` partitions first, their partials
  // stored and merged after the others in order (the same bits); the warp's i-th tile is
  // tile_at(i).
  const int cls = stagger > 1 && whole && ptile >= 0 ? (ptile >> 3) % stagger : 0;
  const int rot =
      cls ? tma_stagger_parts(leading_shared_blocks(a, bt, tile ^ 1, p, lane) * bs, n_parts, cls)
          : 0;
  const int first_t = rot > 0 ? (n_parts - rot) * kMmaPartTiles : 0;
  auto tile_at = [&](int i) { return i + first_t < n_t ? i + first_t : i + first_t - n_t; };
  // The warp's own ring takes the tiles past the group's, in that order: the k-th is its
  // own_at(k)-th tile (a staggered pair reaches tile 0 after its last partitions).
  const int n_own = n_t - n_group, own_first = first_t > 0 ? n_t - first_t : 0;
  auto own_at = [&](int k) { return k < own_first ? k : k + n_group; };

  // Lane b < boxes: box b of tile i (keys from 64 (t0 + i) + b rows) is the block-table entry
  // box_block(i), -1 where there is none (past p, or past the chunk), and cache slot
  // box_slot_of(i, that entry). The loop looks the entry up a tile ahead and makes it a slot
  // where the copy is issued, so no instruction waits on the lookup (ncu, b256 ctx 8,000 FP8:
  // ~13% of the warps' stall samples sat on the product computed right after the load).
  // Blocks of at most 64 slots (they divide 64) hold whole boxes: no division.
  const int tiles_a_block = bs > kMmaTileKeys ? bs / kMmaTileKeys : 1;
  auto box_block = [&](int i) {
    const int t = t0 + tile_at(i);
    if (lane >= boxes || i >= n_t || t * kMmaTileKeys + lane * rows > p) return -1;
    return bt[bs <= kMmaTileKeys ? t * boxes + lane : t / tiles_a_block];
  };
  auto box_slot_of = [&](int i, int block) {
    const int row = bs <= kMmaTileKeys ? 0 : (t0 + tile_at(i)) % tiles_a_block * kMmaTileKeys;
    return block < 0 ? -1 : block * bs + row;
  };
  auto box_slot = [&](int i) { return box_slot_of(i, box_block(i)); };
  // The boxes of the tile from key0 that hold keys up to p (a division on the last tile only).
  auto boxes_from = [&](int key0) {
    return p - key0 >= kMmaTileKeys - 1 ? boxes : (p - key0) / rows + 1;
  };
  // Own tile k into stage k % kStages: one arrival expecting the boxes' bytes, then the copies
  // (a copy may complete before the arrival: the phase cannot, its arrival is pending).
  auto issue = [&](int k, int slot) {
    char* ks = ring + (k % kStages) * C::kPairBytes;
    uint64_t* bar = bars + k % kStages;
    const int n_boxes = boxes_from((t0 + tile_at(own_at(k))) * kMmaTileKeys);
    if (lane == 0) mbar_expect_tx(bar, uint32_t(n_boxes * 2 * rows * kRowBytes));
    if (slot >= 0) {
      tma_load_3d(ks + lane * rows * kRowBytes, &maps.k, 0, hkv, slot, bar);
      tma_load_3d(ks + C::kTileBytes + lane * rows * kRowBytes, &maps.v, 0, hkv, slot, bar);
    }
  };
  // The K (half 0) or V (half 1) boxes of own tile k into the one stage, on barrier `half`.
  auto issue_half = [&](int k, int slot, int half) {
    const int n_boxes = boxes_from((t0 + tile_at(own_at(k))) * kMmaTileKeys);
    if (lane == 0) mbar_expect_tx(bars + half, uint32_t(n_boxes * rows * kRowBytes));
    if (slot >= 0)
      tma_load_3d(ring + half * C::kTileBytes + lane * rows * kRowBytes, half ? &maps.v : &maps.k,
                  0, hkv, slot, bars + half);
  };
  if (lane == 0) {
    for (int s = 0; s < C::kWarpBars; s++) mbar_init(bars + s, 1);
    fence_mbar_init();
  }
  __syncwarp();
  int first[kStages];
#pragma unroll
  for (int k = 0; k < kStages; k++) first[k] = box_slot(own_at(k));
  // Tiles that end before the step's first new key of the sequence (kv_len: p, or less for a
  // slot of a chunk) hold only keys earlier steps wrote: they stream in while the previous
  // kernel finishes; the others wait for it.
  const int first_new = a.kv_len[seq];
  auto old_keys = [&](int i) { return fuse || (t0 + tile_at(i) + 1) * kMmaTileKeys <= first_new; };
  auto issue_first = [&](int k) {
    if constexpr (kSplitKV) {
      issue_half(k, first[k], 0);
      issue_half(k, first[k], 1);
    } else {
      issue(k, first[k]);
    }
  };
  // Group tile j into group slot j % kGroupSlots, by warp 0 (the tiles are whole and old).
  auto issue_group = [&](int j) {
    char* ks = group_ring + (j % kSlots) * C::kPairBytes;
    uint64_t* bar = full + j % kSlots;
    if (lane == 0) mbar_expect_tx(bar, uint32_t(2 * kMmaTileKeys * kRowBytes));
    const int k = j * kMmaTileKeys + lane * rows;
    if (lane < boxes) {
      const int slot = bt[k / bs] * bs + k % bs;
      tma_load_3d(ks + lane * rows * kRowBytes, &maps.k, 0, hkv, slot, bar);
      tma_load_3d(ks + C::kTileBytes + lane * rows * kRowBytes, &maps.v, 0, hkv, slot, bar);
    }
  };
  if (warp == 0) {
    for (int j = 0; j < min(n_group, kSlots); j++) issue_group(j);
    if (a.tma_group_tiles && lane == 0 && n_group > 0) atomicAdd(a.tma_group_tiles, n_group);
  }
#pragma unroll
  for (int k = 0; k < kStages; k++)
    if (k < n_own && old_keys(own_at(k))) issue_first(k);
  // RoPE's cos and sin (fuse: tile i is slot i, as in the split kernel) before the wait.
  RopeCs<kD> rc;
  float new_c = 0.0f, new_s = 0.0f;  // the new key's dims (lane, lane + kD / 2)
  if (fuse) rope_angles<kD, F8>(float(a.positions[tile]), a.inv_freq, lane, rc, new_c, new_s);
  pdl_wait();
#pragma unroll
  for (int k = 0; k < kStages; k++)
    if (k < n_own && !old_keys(own_at(k))) issue_first(k);

  const int G = a.heads / a.kv_heads;
  const int slot = fuse ? tile : a.slot_start[seq] + j0;
  const bf16* qkv_row =
      static_cast<const bf16*>(a.qkv) + size_t(slot) * (a.heads + 2 * a.kv_heads) * kD;
  const bf16* q0 = qkv_row + size_t(hkv) * G * kD;
  const int g = lane >> 2, tig = lane & 3;
  const bf16* q_lo = g < G ? q0 + g * kD : nullptr;
  const bf16* q_hi = !kG8 && g + 8 < G ? q0 + (g + 8) * kD : nullptr;
  uint32_t qa[kD / 16][4];
  load_q_decode<kD, F8>(q_lo, q_hi, fuse, rc, new_c, new_s, lane, qa);
  static_assert(!kSwap || kG8, "the swapped tile: G <= 8");
  // The positions of the lane's rows g, g + 8 (or, swapped, heads 2 tig, 2 tig + 1); -1: padding.
  int pos[2] = {(kSwap ? 2 * tig < G : q_lo != nullptr) ? p : -1,
                (kSwap ? 2 * tig + 1 < G : q_hi != nullptr) ? p : -1};
  const float k_scale = kv_scale_of(a.kv_scale, a.kv_heads, hkv, false);
  const float v_scale = kv_scale_of(a.kv_scale, a.kv_heads, hkv, true);
  const float scale = scale_log2<kD>() * k_scale;

  using State = std::conditional_t<kSwap, ColState<kD>, RowState<kD>>;
  State total, part;
  total.clear();
  part.clear();
  // Lane constants held across the tile loop: the empty asm hides their values, which ptxas
  // otherwise recomputed every tile (36 of the FP8 config-0 tile loop's SASS instructions).
  asm volatile("" : "+r"(pos[0]), "+r"(pos[1]));
  F8LaneOffsets lo8{};
  if constexpr (F8) {
    lo8 = f8_lane_offsets<L>(lane);
    asm volatile("" : "+r"(lo8.k), "+r"(lo8.v0), "+r"(lo8.v2));
  }
  int next = box_block(own_at(kStages));  // the block-table entries of the next tile to issue
  for (int i = 0, k = 0; i < n_t; i++) {
    const int ti = tile_at(i);
    const int key0 = (t0 + ti) * kMmaTileKeys;
    // A group tile (the members read it, then warp 0 refills its slot) or the next own one.
    const bool grp = C::kGroupSlots > 0 && ti < n_group;
    const int gs = ti % kSlots;
    const uint32_t gphase = uint32_t(ti / kSlots) & 1u;
    char* ks = grp ? group_ring + gs * C::kPairBytes : ring + (k % kStages) * C::kPairBytes;
    char* vs = ks + C::kTileBytes;
    if (grp)
      mbar_wait(full + gs, gphase);
    else
      mbar_wait(bars + (kSplitKV ? 0 : k % kStages), uint32_t(k / kStages) & 1u);
    const int live = p - key0 + 1;  // keys key0 .. p of the tile (a group tile: all 64)
    // The new key's row (never in a group tile: those are old keys), once the copies landed
    // (one stage swapped: K here, V once its own barrier completes); a later copy into the
    // stage overwrites it, hence the proxy fence.
    const bool new_row = fuse && !grp && live <= kMmaTileKeys;
    auto write_new = [&](int parts) {
      using KV = std::conditional_t<F8, fp8_e4m3, bf16>;
      write_new_kv<kD, L, KV>(a, qkv_row, hkv, a.cache_slot[slot], new_c, new_s, k_scale, v_scale,
                              ks, vs, live - 1, lane, parts);
      fence_proxy_async();
      __syncwarp();
    };
    if (new_row) write_new(kSplitKV ? 1 : 3);
    auto zero_v_past_p = [&] {
      if (live < kMmaTileKeys) {
        constexpr int kChunks = kRowBytes / 16;
        uint4* v = reinterpret_cast<uint4*>(vs + live * kRowBytes);
        for (int c = lane; c < (kMmaTileKeys - live) * kChunks; c += 32)
          v[c] = make_uint4(0, 0, 0, 0);
        fence_proxy_async();  // (the stage's next copy overwrites these rows)
        __syncwarp();
      }
    };
    State tp;
    if constexpr (kSplitKV) {
      auto after_k = [&] {
        if (grp) return;
        __syncwarp();  // every lane's reads of K are done before it is refilled
        if (k + 1 < n_own) issue_half(k + 1, box_slot_of(own_at(k + 1), next), 0);
      };
      auto before_v = [&] {
        if (grp) return;
        mbar_wait(bars + 1, uint32_t(k) & 1u);
        if (new_row) write_new(2);
        zero_v_past_p();
      };
      tile_partial_swapped<kD, L, F8>(
          qa, ks, vs, key0, pos, lane, scale, tp, lo8,
          TileHooks<decltype(after_k), decltype(before_v)>{after_k, before_v});
    } else {
      zero_v_past_p();
      if constexpr (kSwap)
        tile_partial_swapped<kD, L, F8>(qa, ks, vs, key0, pos, lane, scale, tp, lo8);
      else if constexpr (F8)
        tile_partial_f8<kD, L>(qa, ks, vs, key0, pos[0], pos[1], lane, scale, tp);
      else
        tile_partial<kD, L>(qa, ks, vs, key0, pos[0], pos[1], lane, scale, tp);
    }
    merge_live<kG8>(part, tp, key0, pos);
    __syncwarp();  // every lane's reads of the stage are done before it is refilled
    if (grp) {
      if (lane == 0) mbar_arrive(empty + gs);
      if (warp == 0 && ti + kSlots < n_group) {
        mbar_wait(empty + gs, gphase);
        issue_group(ti + kSlots);
      }
    } else {
      if (k + kStages < n_own) {
        const int slot_next = box_slot_of(own_at(k + kStages), next);
        if constexpr (kSplitKV)
          issue_half(k + 1, slot_next, 1);
        else
          issue(k + kStages, slot_next);
        next = box_block(own_at(k + kStages + 1));
      }
      k++;
    }
    const int t = t0 + ti;
    if (t % kMmaPartTiles == kMmaPartTiles - 1 || ti == n_t - 1) {
      const int pi = t / kMmaPartTiles;
      if (whole && pi < n_parts - rot)
        merge_live<kG8>(total, part, pi * kMmaPartKeys, pos);
      else
        partition_io<F8, kG8, false>(a, part, ptile, hkv, pi, G, lane);
      part.clear();
    }
  }

  if (whole) {
    if (rot > 0) __syncwarp();  // the stored partitions' m and l came from one lane a row
    for (int pi = n_parts - rot; pi < n_parts; pi++) {  // the staggered pair's last partitions
      part.clear();
      partition_io<F8, kG8, true>(a, part, ptile, hkv, pi, G, lane);
      merge_live<kG8>(total, part, pi * kMmaPartKeys, pos);
    }
    store_total<F8, kG8>(static_cast<bf16*>(a.out) + size_t(slot) * a.heads * kD, total, hkv, G,
                         lane, v_scale);
    return;
  }
  // The last chunk of the (tile, kv head) to finish folds the partitions (threadfence
  // reduction: partials written, __syncwarp, lane 0's acquire-release count; the last one's
  // __syncwarp, then it reads them).
  __syncwarp();
  int last = 0;
  if (lane == 0) {
    int* counter = a.mma_counters + size_t(ptile) * a.kv_heads + hkv;
    const int n_active = (n_parts + per - 1) / per;
    last = atomic_add_acq_rel_gpu(counter, 1) == n_active - 1;
    if (last) *counter = 0;  // every other chunk has counted: ready for the next call
  }
  if (__shfl_sync(0xffffffffu, last, 0)) {
    __syncwarp();
    // The warp's ring is free: every tile it issued has been consumed. Each round's partials
    // come in by one bulk copy (a warp's 16-byte cp.async copies of 15 partitions took ~1 us
    // to issue at batch 8: session 39's fold probe).
    uint64_t* fold_bar = bars + C::kBars;
    uint32_t phase = 0;
    auto load = [&](float* dst, const float* from, int bytes) {
      if (lane == 0) {
        fence_proxy_async_all();
        mbar_expect_tx(fold_bar, uint32_t(bytes));
        bulk_load(dst, from, uint32_t(bytes), fold_bar);
      }
      mbar_wait(fold_bar, phase);
      phase ^= 1u;
    };
    if (!fold_staged<kD, 2>(a, ptile, hkv, n_parts, slot, lane, 32, ring, C::kWarpBytes, load,
                            [] { __syncwarp(); }))
      combine_partitions<kD>(a, ptile, hkv, n_parts, slot, lane, 32);
  }
}

// The warps of the kernel with kStages x kWarps blocks resident at once (its shared memory
// request as launch_tma pads it).
template <bool F8, int kStages, int kWarps>
int tma_resident_warps(const AttentionArgs& a) {
  const int bytes =
      smem_for_blocks_per_sm(TmaCfg<F8, kStages, kWarps>::kSmemBytes, a.tma_blocks_per_sm);
  int per_sm = smem_per_sm_bytes() / (bytes + smem_reserved_bytes());
  if (a.tma_blocks_per_sm > 0) per_sm = std::min(per_sm, a.tma_blocks_per_sm);
  return std::max(1, per_sm) * device_sms() * kWarps;
}

template <bool F8, int kStages, int kWarps, bool kG8, bool kSwap = false>
Status launch_tma(const AttentionArgs& a, cudaStream_t stream) {
  using C = TmaCfg<F8, kStages, kWarps>;
  auto* kernel = paged_attention_tma_decode_kernel<F8, kStages, kWarps, kG8, kSwap>;
  // The shared memory a block asks for: its ring, padded past 1 / (cap + 1) of an SM's so that
  // at most tma_blocks_per_sm blocks are resident. With PDL the grid launches while the kernel
  // before (rope_kv_write, itself launched early beside the qkv GEMM) still runs; e4m3's
  // 2-stage blocks fit 3 an SM, so all 256 blocks of b256 landed 3 an SM on the SMs the GEMM
  // left free, and the others idled once it ended: a b256 ctx 8000 step's 22 attention layers
  // took 7.09 ms against 5.92 launched without PDL (H200, cuda_bench --step-case,
  // bench/results/2026-11-28-h200-step-case-pdl-packing.json).
  // The attribute only grows (one block an SM, tma_one_block_an_sm, asks for more), so that a
  // graph captured with a larger request stays valid.
  static int set_bytes = 0, per_sm = 0, asked = -1;
  auto allow = [&](int b) {
    return b > set_bytes ? allow_smem(kernel, b, set_bytes, "paged_attention_tma_decode")
                         : Status::good();
  };
  int bytes = smem_for_blocks_per_sm(C::kSmemBytes, a.tma_blocks_per_sm);
  if (a.tma_blocks_per_sm != asked) {  // the attribute, then the occupancy it allows
    const Status st = allow(bytes);
    if (!st.ok) return st;
    const cudaError_t e =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarps * 32, bytes);
    if (e != cudaSuccess || per_sm < 1) {
      asked = -1;  // ask again next launch
      return Status::bad(cat("paged_attention_tma_decode: ", bytes,
                             " bytes of shared memory a block do not fit an SM (",
                             cudaGetErrorString(e), ")"));
    }
    asked = a.tma_blocks_per_sm;
  }
  int resident = std::min(per_sm, 2) * device_sms() * kWarps;
  if (tma_one_block_an_sm(a, per_sm, device_sms(), kWarps)) {
    bytes = std::max(bytes, smem_for_blocks_per_sm(C::kSmemBytes, 1));
    const Status st = allow(bytes);
    if (!st.ok) return st;
    resident = device_sms() * kWarps;
  }
  using R = TmaRows<F8>;
  TmaMaps maps;
  const uint64_t esize = F8 ? 1 : 2;
  const uint64_t dims[3] = {kD, uint64_t(a.kv_heads), uint64_t(a.cache_slots)};
  const uint64_t strides[2] = {kD * esize, uint64_t(a.kv_heads) * kD * esize};
  const uint32_t box[3] = {kD, 1, uint32_t(std::min(a.block_size, kMmaTileKeys))};
  Status st = encode_tensor_map_3d(maps.k, a.k_cache, R::kType, dims, strides, box, R::kSwizzle,
                                   R::kPromotion, "paged_attention_tma_decode (K pool)");
  if (!st.ok) return st;
  st = encode_tensor_map_3d(maps.v, a.v_cache, R::kType, dims, strides, box, R::kSwizzle,
                            R::kPromotion, "paged_attention_tma_decode (V pool)");
  if (!st.ok) return st;
  const TmaDecodeSplit w = tma_decode_split(a, resident);
  // Group blocks where sequences share blocks and every pair is whole (one wave).
  const bool group =
      C::kGroupSlots > 0 && a.tma_shared_kv && a.tma_group && w.whole_tiles == 0 && w.z == 1;
  const int grid =
      group ? ceil_div(a.n_tiles, kWarps) * a.kv_heads
            : ceil_div((w.whole_tiles + (a.n_tiles - w.whole_tiles) * w.z) * a.kv_heads, kWarps);
  // Steps whose sequences share blocks: while every warp computes its shared prefix at once
  // (L2 hits) HBM idles; staggered pairs take some of the own keys past their prefix first, so
  // that other warps stream HBM then (tma_stagger_parts).
  const int stagger = a.tma_shared_kv && w.partials ? a.tma_stagger : 1;
  const cudaError_t e = launch_kernel(kernel, dim3(grid), kWarps * 32, bytes, stream, a.pdl, a,
                                      maps, w.whole_tiles, w.z, stagger, group);
  if (e != cudaSuccess)
    return Status::bad(cat("paged_attention_tma_decode: launch: ", cudaGetErrorString(e)));
  return launch_status("paged_attention_tma_decode");
}

// The builds cuda_bench and the tests compare, by AttentionArgs::tma_config (stages x warps a
// block); config 0 is the default for the cache dtype. For G <= 8 it is the swapped-operand tile
// (attention_swap.cuh) and config 3 the same ring with tile_partial(_f8), compared bitwise:
// e4m3 at b256 ctx 8000 H200 275 us against 302 (bench/results/2026-11-28-h200-attention-f8-
// swapped.json); bf16 498 against 498, b64 ctx 8000 161 against 164, b256 ctx 600 57.9 against
// 59.4 (bench/results/2026-11-28-h200-attention-f8-pairs-bf16-swapped-not-kept.json).
template <bool F8, bool kG8>
Status launch_tma_config(const AttentionArgs& a, cudaStream_t stream) {
  if (a.tma_config == 3) return launch_tma<F8, 2, 4, kG8>(a, stream);
  if (a.tma_config == 5) return launch_tma<F8, 2, 3, kG8, kG8>(a, stream);
  if constexpr (F8) {
    // 2 stages (16 KB a warp): three blocks of 4 warps an SM (two with 3 stages); at
    // b256 ctx 8000 H100 385 us against 397-401 with 3 stages, H200 299-300 against 302-304
    // (bench/results/2026-11-27-h200-h100-tma-promotion-pairs-not-kept.json).
    if (a.tma_config == 1) return launch_tma<F8, 4, 4, kG8>(a, stream);
    if (a.tma_config == 2) return launch_tma<F8, 3, 4, kG8>(a, stream);
  } else {  // 32 KB a warp: one block of 4 warps, or three of 2
    if (a.tma_config == 1) return launch_tma<F8, 3, 2, kG8>(a, stream);
    if (a.tma_config == 2) return launch_tma<F8, 4, 2, kG8>(a, stream);
    // One stage a warp (16 KB): two blocks of 4 an SM, twice the warps of the 2-stage blocks
    // (128 KB, one an SM) with half as much in flight each. The default past one wave of the
    // 2-stage blocks (528 warps on an H200) where sequences share cached blocks (read through
    // L2: bound by the warps an SM, not by bandwidth): at b256 with groups of 8 sharing 1,746
    // keys' blocks 430-440 vs 457-463 us at ctx 8000, 138-144 vs 171-173 at ctx 3000.
    // Unshared it loses at long contexts (ctx 8000 490-509 vs 487-498 us), and within one wave
    // (b128: 263 vs 293-300; one stage chunks every pair in 2). A ring of 3 half tiles (K and V
    // apart, 24 KB a warp) was no better than one stage. bench/results/2026-11-28-h200-s21-
    // {tma-one-stage-bf16, bf16-shared-8-one-stage, half-ring-not-kept}.json.
    const bool one_stage =
        a.tma_config == 4 ||
        (a.tma_shared_kv && a.n_tiles * a.kv_heads > tma_resident_warps<F8, 2, 4>(a));
    if (one_stage) return launch_tma<F8, 1, 4, kG8, kG8>(a, stream);
    // Config 0 here. Few pairs (<= 64) with more partitions than a wave of the 4-warp blocks
    // has warps: blocks of 3 warps (two an SM as before: 1.5x the warps, so that a chunk holds
    // one partition, not two, up to 24 a pair at batch 8). H200, loom bench two rounds: b8
    // 0.952 -> 0.941 s/frame, b16 1.152 -> 1.146 (bench/results/2026-12-03-h200-s37-tma-three-
    // warp-blocks.json).
    const int pairs = a.n_tiles * a.kv_heads;
    if (pairs <= 64 && pairs * attention_mma_max_parts(a.bt_stride, a.block_size) >
                           tma_resident_warps<F8, 2, 4>(a))
      return launch_tma<F8, 2, 3, kG8, kG8>(a, stream);
  }
  return launch_tma<F8, 2, 4, kG8, kG8>(a, stream);
}

}  // namespace

bool tma_decode_usable(const AttentionArgs& a) {
  const int bs = a.block_size;
  return a.head_dim == kD && a.cache_slots > 0 && bs > 0 &&
         (kMmaTileKeys % bs == 0 || bs % kMmaTileKeys == 0) && a.tma_config >= 0 &&
         a.tma_config < kTmaDecodeConfigs;
}

Status paged_attention_tma_decode(const AttentionArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(tma_decode_usable(a), "paged_attention_tma_decode: head_dim ", a.head_dim,
                 ", block_size ", a.block_size, ", cache_slots ", a.cache_slots, ", tma_config ",
                 a.tma_config,
                 " (needs head_dim 64, the pool's slot count, a block size that divides 64 or is "
                 "a multiple of it, a config in [0, ",
                 kTmaDecodeConfigs, "))");
  LOOM_ARG_CHECK(a.decode && (!a.fuse_rope || (a.positions && a.cache_slot && a.inv_freq)),
                 "paged_attention_tma_decode: decode steps; fuse_rope needs positions, cache_slot, "
                 "inv_freq");
  if (a.n_tiles == 0) return Status::good();
  const bool g8 = a.heads / a.kv_heads <= 8;
  if (a.kv_fp8)
    return g8 ? launch_tma_config<true, true>(a, stream)
              : launch_tma_config<true, false>(a, stream);
  return g8 ? launch_tma_config<false, true>(a, stream)
            : launch_tma_config<false, false>(a, stream);
}

}  // namespace loom::gpu
