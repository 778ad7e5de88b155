// The host side of reading a shared prefix once a group (the TMA decode kernel's
// AttentionArgs::shared_items, shared_groups, own_first_part): which one-slot tiles of a step
// hold the same cache blocks for whole 256-key partitions of their context, grouped by up to
// kMaxSharedMembers. Plain C++, compiled into the CPU library too, so it is tested without a
// GPU.
//
// Members: one-slot tiles whose sequences' block tables agree with the group's first tile's
// from position 0 (prefix sharing gives such sequences the same physical blocks), and the
// several tiles of one sequence (a frame's action slots: each slot a tile, every cached block
// shared). A group's shared partitions are the whole 256-key partitions below every member's
// kv_len (cached: no member writes them this step) on blocks all members hold. A group needs
// at least 2 members and 1 partition; every other tile reads its whole context itself.
#pragma once

#include <cstdint>
#include <vector>

namespace loom {

struct SharedPrefixPlan {
  std::vector<int32_t> items{0};  // [1 + 2 n]: n, then (group, partition)
  std::vector<int32_t> groups;    // [groups, 1 + kMaxSharedMembers]: count, member tiles, -1 pad
  std::vector<int32_t> own;       // [tiles]: the first partition a tile's own warps read
  int n_groups() const;
};

// One-slot tiles 0 .. tile_seq.size() - 1 of sequence tile_seq[t]; per sequence its kv_len and
// its row of block_tables (blocks_per_seq wide). At most max_groups groups and max_items
// items (the upload's room); past them, tiles read their context themselves.
SharedPrefixPlan plan_shared_prefixes(const std::vector<int32_t>& tile_seq, const int32_t* kv_len,
                                      const int32_t* block_tables, int blocks_per_seq,
                                      int block_size, int max_groups, int max_items);

}  // namespace loom
