// Paged attention over the KV cache, one kernel for prefill chunks and decode (flash-decoding
// style). A block takes one KV head, one tile of query rows and one split of the keys:
//   rows    = (slot, query head) pairs of that KV head: all G = heads / kv_heads query heads of
//             up to kRows / G consecutive new slots of one sequence (decode: one slot, G rows),
//             so every K/V element loaded serves all G heads (GQA);
//   splits  = the keys [0, kv_len + last slot] cut into num_splits contiguous ranges, so a long
//             context (14,550 slots) at batch 1 still fills the GPU; each split leaves an
//             unnormalised partial (o, max, sum) and a combine kernel merges them.
// Keys are streamed in tiles of kKeys through shared memory with an online softmax. New slot j
// of sequence s sits at cache index kv_len[s] + j and attends to indices [0, kv_len[s] + j].
//
// bf16 with head_dim 16 or 64 and a GQA ratio up to 16 takes the tensor-core kernels of
// attention_mma.cu instead (batch invariant: a row's output bits depend only on its sequence's
// cache and its position, never on the batch, the tiling or the grid); the kernels of
// attention.cu stay for fp32 (exact comparisons with the CPU), other shapes, and fuse_rope.
//
// The argument struct, the constants of the kernels' tiling and the fp32 host reference live
// here (plain C++, so the CPU backend and CPU-only builds include it); the launchers in
// attention.cuh. The reference (t F32) reads fp32 caches holding the values the kernel's
// cache reads back as (an FP8 cache: the dequantised values, so it applies no kv_scale).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace loom {

constexpr int kAttnRows = 32;   // query rows (slot, head) per block
constexpr int kDecodeMaxG = 8;  // the decode kernel's largest GQA ratio

// The TMA decode kernel's builds (AttentionArgs::tma_config in [0, kTmaDecodeConfigs)). With
// G <= 8, config 0 (the default) is the swapped-operand tile, config 3 the same ring with
// tile_partial(_f8) (the two compared bitwise), for both cache dtypes, and config 4 (bf16) the
// swapped tile with one stage a warp (config 0's choice past one wave where tma_shared_kv),
// config 5 the 2-stage ring in blocks of 3 warps (config 0's choice for few pairs with many
// partitions: launch_tma_config).
constexpr int kTmaDecodeConfigs = 6;
// A group block's slots (one-stage builds): the (K, V) tiles of its shared prefix in flight or
// being read, so a group needs at least this many whole shared tiles. Three (the one-stage bf16
// block's rings 1024-aligned without slack to fit two blocks an SM) were slower: b256 groups of
// 8 sharing 1,746 keys, H200, ctx 1,746 60.0-60.5 -> 61.4 us, ctx 3,000 125.0 -> 130.4-131.4
// (bench/results/2026-12-02-h200-s26-group-slots-3-not-kept.json).
constexpr int kTmaGroupSlots = 2;

// The prefill kernel's default ring depth (AttentionArgs::prefill_stages).
constexpr int kMmaPrefillStages = 2;
// The prefill kernel's default register build (AttentionArgs::prefill_blocks_per_sm): 3 blocks
// an SM (ptxas at D 64: 168 registers with 8 / 16 bytes of spill stores in bf16 / e4m3, against
// 168 / 176 registers and 2 blocks an SM at 0). H100, cuda_bench --prefill-case, 2 stages, 0 -> 3:
// e4m3 1 x 1,746 slots 125.8 -> 121.2 us, 8 x 1,746 930 -> 753; bf16 1 x 1,746 130.9 -> 128.9;
// deeper rings gained nothing at either build
// (bench/results/2026-12-07-h100-s70-ctest-prefill-ring-mbs.json).
constexpr int kMmaPrefillBlocksPerSm = 3;

struct AttentionArgs {
  DType t = DType::BF16;  // dtype of qkv, out and (unless kv_fp8) the caches
  // The caches hold e4m3 (kernels/kv_quant.cuh): scores use q·k_q·(scale·k_s), outputs
  // v_s·Σp·v_q; kv_scale [2, kv_heads] is this layer's K then V scales (null: 1).
  bool kv_fp8 = false;
  const float* kv_scale = nullptr;
  const void* qkv = nullptr;              // [n_slots, (heads + 2 kv_heads) * head_dim], q rotated
  const void* k_cache = nullptr;          // [num_blocks, block_size, kv_heads, head_dim]
  const void* v_cache = nullptr;          // same
  const int32_t* block_tables = nullptr;  // [n_seqs, bt_stride]
  int bt_stride = 0;
  const int32_t* kv_len = nullptr;      // [n_seqs]
  const int32_t* slot_start = nullptr;  // [n_seqs + 1]
  const int32_t* tiles = nullptr;       // [n_tiles, 3]: sequence, first new slot j0, slots nj
  int n_tiles = 0, heads = 0, kv_heads = 0, head_dim = 0, block_size = 0;
  int num_splits = 1;
  float* partial_o = nullptr;   // [n_tiles, kv_heads, num_splits, kAttnRows, head_dim] (splits > 1)
  float* partial_ml = nullptr;  // [n_tiles, kv_heads, num_splits, kAttnRows, 2] max, sum
  void* out = nullptr;          // [n_slots, heads * head_dim]
  // Every tile holds one slot (a decode step) and heads / kv_heads ≤ kDecodeMaxG: use the
  // decode kernel (splits of whole 128-key passes, 4 threads a key).
  bool decode = false;
  bool pdl = false;  // programmatic dependent launch (see launch_kernel in common.cuh)
  // Decode only: do rope_kv_write's work here (rotate q and the new k, write the new k and v
  // into the cache at cache_slot), saving a kernel per layer. Needs the three inputs below,
  // and tile i to hold slot i, sequence i's one slot (the backend's decode steps).
  bool fuse_rope = false;
  const int32_t* positions = nullptr;   // [n_slots]
  const int32_t* cache_slot = nullptr;  // [n_slots]
  const float* inv_freq = nullptr;      // [head_dim / 2]
  // Tensor-core path (attention_mma_supported shapes, fuse_rope off). false forces the
  // CUDA-core kernels (bench comparisons).
  bool mma = true;
  // Decode partitions of the tensor-core path: [n_tiles, kv_heads, attention_mma_max_parts,
  // G, head_dim + 2] (acc, then max, sum; unnormalised). Needed by the decode kernel when a
  // sequence can have more than one partition; with none (or too few floats) the launcher runs
  // the prefill kernel, which gives the same bits.
  float* mma_partial = nullptr;
  size_t mma_partial_floats = 0;
  // [mma_counters_len] ints, zero: with n_tiles * kv_heads of them the decode kernel's last
  // block of each (tile, kv head) folds the partitions itself (no combine launch) and sets
  // its counter back to zero. null (or too few): the combine kernel. Same bits either way.
  int* mma_counters = nullptr;
  size_t mma_counters_len = 0;
  // Set by the launcher (attention_mma.cu): the decode kernel's blocks all resident at once, so
  // every active block of a (tile, kv head) folds a share of its items (fold_spread).
  bool spread_fold = false;
  // Slots in each cache pool ([cache_slots, kv_heads, head_dim]): the bounds of the tensor maps
  // of the TMA decode kernel (attention_tma.cu); 0: unknown, that kernel is not used.
  int cache_slots = 0;
  // Which tensor-core decode kernel runs (the same bits): the launcher's choice, the split
  // kernel (cp.async tiles, attention_mma.cu) or the TMA pipeline (attention_tma.cu, head_dim
  // 64, needs cache_slots). tma_config picks one of the TMA kernel's builds (stages, warps a
  // block; 0: the default for the cache dtype): tests and cuda_bench compare them.
  enum class DecodeKernel { Auto, Split, Tma } decode_kernel = DecodeKernel::Auto;
  int tma_config = 0;
  // At most this many TMA decode blocks resident an SM (the shared memory request padded to
  // make it so; 0: as many as fit). Launched early by PDL while the kernel before holds some
  // SMs, a grid that fits 3 blocks an SM piles onto the free SMs and leaves the others idle
  // once they free (attention_tma.cu).
  int tma_blocks_per_sm = 2;
  // The same for the split decode kernel where its grid fits one wave of that many blocks an
  // SM (attention_mma.cu; 0: as many as fit).
  int split_blocks_per_sm = 2;
  // TMA decode with more (tile, kv head) pairs than one wave of warps: the pairs past the last
  // full wave in chunks of partitions spread over a wave (false: every pair whole, a warp each).
  bool tma_chunk_tail = true;
  // Sequences of the step share cached blocks (prefix sharing: tiles_share_blocks): the keys
  // they share come from L2, and a bf16 TMA decode past one wave of its 2-stage blocks takes
  // one stage a warp, twice the warps (attention_tma.cu). The same bits either way.
  bool tma_shared_kv = false;
  // In such steps, the whole pairs of tiles 8 c .. 8 c + 7 fall in class c % tma_stagger and
  // take their last partitions first (tma_stagger_parts; their partials stored in mma_partial
  // and merged last, in order: the same bits), so that not every warp reads its shared prefix
  // at once (1: none). Two classes: bf16 b256 groups of 8 sharing 1,746 keys, H200, ctx 8000
  // 425 us with 1, 409 with 2, 441 with 4, 474 with 8; ctx 3000 138 / 124 / 137 / 144
  // (bench/results/2026-11-28-h200-s22-stagger-classes.json).
  int tma_stagger = 2;
  // In such steps on one stage a warp with every pair whole, a block's warps take 4 tiles of one
  // kv head (not 4 kv heads of one tile) and read the cached blocks those tiles share once, into
  // the block's own slots (attention_tma.cu). The same bits either way. The backend sets it
  // where the shared prefixes are a third of the contexts or more (tiles_group_prefix).
  bool tma_group = false;
  // Tests: where set, warp 0 of each group block adds the group tiles it read for the block.
  int* tma_group_tiles = nullptr;
  // The prefill / mixed kernel's ring of (K, V) tiles a block (2-4; attention_mma.cu): tiles
  // t + 1 .. t + stages - 1 in flight while tile t's products run. The same bits at any depth.
  int prefill_stages = kMmaPrefillStages;
  // The blocks an SM its build was compiled to fit by registers (__launch_bounds__; 0: ptxas's
  // choice, or 3). The same bits either way.
  int prefill_blocks_per_sm = kMmaPrefillBlocksPerSm;
};

// Tensor-core path constants. They are part of the arithmetic (the order of the softmax
// merges), so they never depend on batch, grid or chunking.
constexpr int kMmaTileKeys = 64;                            // keys per tile partial
constexpr int kMmaPartTiles = 4;                            // tiles per partition
constexpr int kMmaPartKeys = kMmaTileKeys * kMmaPartTiles;  // 256
constexpr int kMmaWarps = 4;                                // warps per block

inline bool attention_mma_supported(DType t, int heads, int kv_heads, int head_dim) {
  return t == DType::BF16 && (head_dim == 16 || head_dim == 64) && kv_heads > 0 &&
         heads % kv_heads == 0 && heads / kv_heads <= 16;
}

// Partitions a sequence of a step with block tables bt_stride wide can have (constexpr: the
// kernels call it too, through --expt-relaxed-constexpr).
constexpr int attention_mma_max_parts(int bt_stride, int block_size) {
  return (bt_stride * block_size + kMmaPartKeys - 1) / kMmaPartKeys;
}

// Floats of mma_partial the decode kernel needs for n_tiles one-slot tiles.
inline size_t attention_mma_partial_floats(int n_tiles, int kv_heads, int heads, int head_dim,
                                           int bt_stride, int block_size) {
  return size_t(n_tiles) * kv_heads * attention_mma_max_parts(bt_stride, block_size) *
         (heads / kv_heads) * (head_dim + 2);
}

// How the TMA decode kernel (attention_tma.cu) splits its (tile, kv head) pairs among
// `resident` warps, one wave of its blocks: tiles below whole_tiles take a warp each (no
// partials); the others z chunks of consecutive partitions each, folded by the last, their
// partials and counters indexed from whole_tiles. Pairs that fit one wave take chunks enough to
// fill it (2 blocks an SM even where 3 fit: swept on an H200, e4m3 ctx 8000, the third block's
// warps slowed every warp; b192 282 -> 260 us, b128 210 -> 195, b64 134 -> 120, b32 92 -> 81,
// b256 the same, bench/results/2026-11-28-h200-tma-decode-chunks-sweep.json). More pairs: the
// full waves' worth whole and the rest in chunks spread over a wave behind them
// (tma_chunk_tail). With every pair whole, the 16 pairs past b256's 1,056 warps in a step with 2
// sequences on action slots (7 one-slot tiles each) ran a second wave of whole sequences: H200
// e4m3 ctx 8000, such a step took 4.10 ms more than a decode step, 0.24 with the tail
// (bench/results/2026-11-28-h200-tma-chunk-tail.json). Chunks need counters and partials for the
// chunked tiles; without them every tile is whole.
struct TmaDecodeSplit {
  int whole_tiles = 0, z = 1;
  bool partials = false;  // mma_partial and the counters cover the tiles from whole_tiles
};
inline TmaDecodeSplit tma_decode_split(const AttentionArgs& a, int resident) {
  const int pairs = a.n_tiles * a.kv_heads;
  TmaDecodeSplit w;
  if (pairs > resident) {
    if (!a.tma_chunk_tail) return w;
    w.whole_tiles = pairs / resident * resident / a.kv_heads;
  }
  const int n = a.n_tiles - w.whole_tiles;
  const bool counters =
      a.mma_counters != nullptr && a.mma_counters_len >= size_t(n) * a.kv_heads &&
      a.mma_partial != nullptr &&
      a.mma_partial_floats >= attention_mma_partial_floats(n, a.kv_heads, a.heads, a.head_dim,
                                                           a.bt_stride, a.block_size);
  if (!counters) return TmaDecodeSplit{};
  w.partials = true;
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);
  w.z = std::max(1, std::min(max_parts, resident / std::max(1, n * a.kv_heads)));
  return w;
}

// Whether a TMA decode launch whose blocks fit `per_sm` an SM (at most 2 are used) runs at one
// block an SM instead: where one wave of two blocks an SM would cut every pair in two chunks
// (tma_decode_split's z = 2: pairs over a third and up to half of the wave), so that at one
// block an SM each pair takes one warp whole and no partition is stored or folded. H100, e4m3
// at 8,148 keys (cuda_bench --pipeline-case's blocks-an-SM cap of 1 against 2, attention alone
// by difference), µs: b128 215.7 -> 182.9, b96 168.2 -> 151.3; b64 (4 chunks against 2)
// 114.8 / 114.3, b192 (whole either way) 281 / 285
// (bench/results/2026-12-07-h100-s68-pipeline-probe.json). Launched so (cuda_bench
// --attention-case B 8148 4 fp8 64, H100): b96 187.0 -> 163.5, b128 233.0 -> 196.6, b256 382
// either way; loom bench FP8, 128 jobs x 8 frames: 27,647 -> 29,538 tokens/s
// (bench/results/2026-12-07-h100-s69-tma-one-block.json).
inline bool tma_one_block_an_sm(const AttentionArgs& a, int per_sm, int sms, int warps_a_block) {
  if (per_sm < 2 || a.tma_blocks_per_sm == 1) return false;
  const TmaDecodeSplit w = tma_decode_split(a, 2 * sms * warps_a_block);
  return w.whole_tiles == 0 && w.z == 2;
}

// The last partitions a TMA decode pair of class c (AttentionArgs::tma_stagger) and n_parts
// partitions takes first, when its first `shared_keys` keys' blocks are shared with its
// neighbour's: c times as many as the shared prefix holds (class c computes its prefix while
// the classes before it stream their own keys), at most the partitions past it. With two
// classes, bf16 b256 groups of 8 sharing 1,746 keys (7 partitions), H200: ctx 8000 (31
// partitions) 440 us unstaggered, 420 with class 1 taking 7, 430 taking 3 or 11; ctx 3000 (12)
// 139 against 125-126 taking 4-6 (bench/results/2026-11-28-h200-s22-stagger-sweep.json).
constexpr int tma_stagger_parts(int shared_keys, int n_parts, int c) {
  const int shared = (shared_keys + kMmaPartKeys - 1) / kMmaPartKeys;
  const int own = n_parts - shared;
  return own <= 0 ? 0 : (c * shared < own ? c * shared : own);
}

// AttentionArgs::tma_shared_kv: whether two sequences of the one-slot tiles 0 .. n-1 (tiles
// [n, 3]: sequence, j0, slots; in sequence order) start on the same cache block with a whole
// 64-key tile cached (prefix sharing). block_tables [sequences, bt_stride].
inline bool tiles_share_blocks(const int32_t* tiles, int n, const int32_t* kv_len,
                               const int32_t* block_tables, int bt_stride) {
  std::vector<int32_t> first;
  for (int t = 0; t < n; t++) {
    const int s = tiles[3 * t];
    if ((t == 0 || tiles[3 * (t - 1)] != s) && kv_len[s] >= kMmaTileKeys)
      first.push_back(block_tables[size_t(s) * bt_stride]);
  }
  std::sort(first.begin(), first.end());
  return std::adjacent_find(first.begin(), first.end()) != first.end();
}

// AttentionArgs::tma_group: whether most sets of one-slot tiles 4 g .. 4 g + 3 (the TMA decode
// kernel's group blocks; tiles [n, 3] as above) have a common prefix of cached blocks (whole
// 64-key tiles before every kv_len, kTmaGroupSlots or more) of a third of the first tile's
// tiles or more.
// There group blocks read the prefix once for their 4 sequences; at long contexts 4 kv heads
// of a tile a block stream better (bf16 b256 groups of 8 sharing 1,746 keys, H200: ctx 1,746 /
// 3,000 / 8,000 59.8 / 124.2 / 426.6 us with group blocks, 71.6 / 132.1 / 417.6 without;
// bench/results/2026-12-02-h200-s23-group-blocks.json).
inline bool tiles_group_prefix(const int32_t* tiles, int n, const int32_t* kv_len,
                               const int32_t* block_tables, int bt_stride, int block_size) {
  int sets = 0, group = 0;
  for (int t0 = 0; t0 + 1 < n; t0 += 4) {
    const int s0 = tiles[3 * t0], p0 = kv_len[s0] + tiles[3 * t0 + 1];
    int keys = kv_len[s0];  // the set's common prefix, in keys
    for (int t = t0 + 1; t < std::min(n, t0 + 4); t++) {
      const int s = tiles[3 * t], p = kv_len[s] + tiles[3 * t + 1];
      const int blocks = std::min(p, p0) / block_size + 1;
      int lead = 0;
      while (lead < blocks && block_tables[size_t(s) * bt_stride + size_t(lead)] ==
                                  block_tables[size_t(s0) * bt_stride + size_t(lead)])
        lead++;
      keys = std::min({keys, lead * block_size, kv_len[s]});
    }
    const int shared_tiles = keys / kMmaTileKeys, tiles0 = p0 / kMmaTileKeys + 1;
    sets++;
    group += shared_tiles >= kTmaGroupSlots && 3 * shared_tiles >= tiles0;
  }
  return sets > 0 && 2 * group >= sets;
}

// Slots of one sequence per tile for a GQA ratio G = heads / kv_heads (CUDA-core kernel).
inline int attention_slots_per_tile(int heads, int kv_heads) {
  return kAttnRows / (heads / kv_heads);
}

// ... for the kernel paged_attention picks: the tensor-core prefill kernel takes 4 warps x
// floor(16 / G) slots (a warp's 16 mma rows are whole slots of G heads).
inline int attention_slots_per_tile(DType t, int heads, int kv_heads, int head_dim) {
  if (attention_mma_supported(t, heads, kv_heads, head_dim))
    return kMmaWarps * (16 / (heads / kv_heads));
  return attention_slots_per_tile(heads, kv_heads);
}

// Floats of partial_o needed for `blocks` = n_tiles * kv_heads * num_splits.
inline size_t attention_partial_floats(size_t blocks, int head_dim) {
  return blocks * kAttnRows * size_t(head_dim);
}

namespace cpu {

// The reference: for every tile (sequence, j0, nj), the nj new slots from j0 of the sequence
// over its paged cache (attend_sequence). Scratch buffers only; the CPU backend runs it.
void paged_attention(const AttentionArgs& a);

// One sequence's causal GQA attention, the reference's inner loop. q: n_new rows of `heads`
// heads, q_stride floats apart (head h of row j at q + j·q_stride + h·head_dim, rotated);
// caches [num_blocks, block_size, kv_heads, head_dim] fp32; block_table [≥ ceil((kv_len +
// n_new) / block_size)]. New slot j sits at cache index kv_len + j and attends to indices
// [0, kv_len + j] (scores q·k / sqrt(head_dim), softmax in fp32); query head h reads kv head
// h / (heads / kv_heads). out: [n_new, heads, head_dim].
void attend_sequence(const float* q, int q_stride, const float* k_cache, const float* v_cache,
                     const int32_t* block_table, int kv_len, int n_new, int heads, int kv_heads,
                     int head_dim, int block_size, float* out);

}  // namespace cpu
}  // namespace loom
