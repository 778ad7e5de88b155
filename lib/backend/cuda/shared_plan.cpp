#include "backend/cuda/shared_plan.h"

#include <algorithm>
#include <unordered_map>

#include "kernels/attention.h"

namespace loom {

std::vector<int32_t> plan_shared_blocks(const std::vector<int32_t>& tile_seq, const int32_t* kv_len,
                                        const int32_t* block_tables, int blocks_per_seq,
                                        int block_size, int kv_heads) {
  const int n_tiles = int(tile_seq.size()), bs = block_size;
  if (kMmaTileKeys % bs != 0 && bs % kMmaTileKeys != 0) return {};
  auto table = [&](int s) { return block_tables + size_t(s) * blocks_per_seq; };
  // Candidates by the first block of their table: tiles with a whole cached tile.
  std::unordered_map<int32_t, std::vector<int>> by_first;
  std::vector<int32_t> firsts;  // in the order first seen, so the plan follows the tiles
  for (int t = 0; t < n_tiles; t++) {
    const int s = tile_seq[size_t(t)];
    if (kv_len[s] < kMmaTileKeys) continue;
    auto [it, fresh] = by_first.try_emplace(table(s)[0]);
    if (fresh) firsts.push_back(table(s)[0]);
    it->second.push_back(t);
  }
  std::vector<int32_t> plan;
  std::vector<bool> planned(size_t(n_tiles), false);
  for (int32_t first : firsts) {
    const std::vector<int>& tiles = by_first[first];
    for (size_t m0 = 0; m0 + kTmaShareWarps <= tiles.size(); m0 += kTmaShareWarps) {
      // Whole tiles below every member's kv_len on blocks all members hold.
      const int lead = tile_seq[size_t(tiles[m0])];
      int n = kv_len[lead] / kMmaTileKeys;
      for (size_t i = m0 + 1; i < m0 + kTmaShareWarps; i++) {
        const int s = tile_seq[size_t(tiles[i])];
        n = std::min(n, kv_len[s] / kMmaTileKeys);
        const int blocks = (n * kMmaTileKeys + bs - 1) / bs;
        int same = 0;
        while (same < blocks && table(s)[same] == table(lead)[same]) same++;
        n = std::min(n, same * bs / kMmaTileKeys);
      }
      if (n == 0) continue;
      for (int h = 0; h < kv_heads; h++)
        for (size_t i = m0; i < m0 + kTmaShareWarps; i++)
          plan.insert(plan.end(), {tiles[i] * kv_heads + h, n});
      for (size_t i = m0; i < m0 + kTmaShareWarps; i++) planned[size_t(tiles[i])] = true;
    }
  }
  if (plan.empty()) return plan;
  for (int t = 0; t < n_tiles; t++)
    if (!planned[size_t(t)])
      for (int h = 0; h < kv_heads; h++) plan.insert(plan.end(), {t * kv_heads + h, 0});
  return plan;
}

}  // namespace loom
