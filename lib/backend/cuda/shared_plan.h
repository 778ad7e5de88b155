// The host side of reading a shared prefix once a block of the TMA decode kernel
// (AttentionArgs::pair_plan): which one-slot tiles of a step hold the same cache blocks for
// their first 64-key tiles, kTmaShareWarps of them a block of one kv head. Plain C++, compiled
// into the CPU library too, so it is tested without a GPU.
//
// Members: one-slot tiles whose sequences' block tables agree with the first member's from
// position 0 (prefix sharing gives such sequences the same physical blocks), and the several
// tiles of one sequence (a frame's action slots: each slot a tile, every cached block shared),
// taken kTmaShareWarps at a time in tile order; the rest of a set (fewer than a block's warps)
// read their context themselves. A block's shared tiles: the whole 64-key tiles below every
// member's kv_len (cached: no member writes them this step) on blocks all members hold.
#pragma once

#include <cstdint>
#include <vector>

namespace loom {

// One-slot tiles 0 .. tile_seq.size() - 1 of sequence tile_seq[t]; per sequence its kv_len and
// its row of block_tables (blocks_per_seq wide). Returns the pair plan, [tiles * kv_heads, 2]:
// per warp its (tile * kv_heads + kv head) and its shared tiles; the sharing blocks first,
// then every other pair in order (tile-major) with 0. Empty where no block shares a tile.
std::vector<int32_t> plan_shared_blocks(const std::vector<int32_t>& tile_seq, const int32_t* kv_len,
                                        const int32_t* block_tables, int blocks_per_seq,
                                        int block_size, int kv_heads);

}  // namespace loom
