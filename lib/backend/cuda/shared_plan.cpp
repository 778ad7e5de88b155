#include "backend/cuda/shared_plan.h"

#include <algorithm>
#include <unordered_map>

#include "kernels/attention.h"

namespace loom {

int SharedPrefixPlan::n_groups() const {
  return int(groups.size()) / (1 + kMaxSharedMembers);
}

SharedPrefixPlan plan_shared_prefixes(const std::vector<int32_t>& tile_seq, const int32_t* kv_len,
                                      const int32_t* block_tables, int blocks_per_seq,
                                      int block_size, int max_groups, int max_items) {
  SharedPrefixPlan plan;
  const int n_tiles = int(tile_seq.size());
  plan.own.assign(size_t(n_tiles), 0);
  if (kMmaPartKeys % block_size != 0) return plan;  // a partition is whole blocks
  const int part_blocks = kMmaPartKeys / block_size;
  auto table = [&](int s) { return block_tables + size_t(s) * blocks_per_seq; };
  // Candidates by the first block of their table: sequences with a whole partition cached.
  std::unordered_map<int32_t, std::vector<int>> by_first;
  std::vector<int32_t> firsts;  // in the order first seen, so the plan follows the tiles
  for (int t = 0; t < n_tiles; t++) {
    const int s = tile_seq[size_t(t)];
    if (kv_len[s] < kMmaPartKeys) continue;
    auto [it, fresh] = by_first.try_emplace(table(s)[0]);
    if (fresh) firsts.push_back(table(s)[0]);
    it->second.push_back(t);
  }
  for (int32_t first : firsts) {
    const std::vector<int>& tiles = by_first[first];
    for (size_t g0 = 0; g0 + 1 < tiles.size(); g0 += kMaxSharedMembers) {
      const size_t m = std::min(tiles.size() - g0, size_t(kMaxSharedMembers));
      if (m < 2) break;
      // Whole partitions below every member's kv_len on blocks all members hold.
      const int lead = tile_seq[size_t(tiles[g0])];
      int parts = kv_len[lead] / kMmaPartKeys;
      for (size_t i = g0 + 1; i < g0 + m; i++) {
        const int s = tile_seq[size_t(tiles[i])];
        parts = std::min(parts, kv_len[s] / kMmaPartKeys);
        int same = 0;
        while (same < parts * part_blocks && table(s)[same] == table(lead)[same]) same++;
        parts = std::min(parts, same / part_blocks);
      }
      if (parts == 0) continue;
      if (plan.n_groups() == max_groups || plan.items[0] + parts > max_items) return plan;
      const int g = plan.n_groups();
      plan.groups.push_back(int32_t(m));
      for (size_t i = 0; i < size_t(kMaxSharedMembers); i++)
        plan.groups.push_back(i < m ? tiles[g0 + i] : -1);
      for (int pi = 0; pi < parts; pi++) plan.items.insert(plan.items.end(), {g, pi});
      plan.items[0] += parts;
      for (size_t i = g0; i < g0 + m; i++) plan.own[size_t(tiles[i])] = parts;
    }
  }
  return plan;
}

}  // namespace loom
