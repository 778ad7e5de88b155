// The TMA decode kernel's host-side plans, checked in every build: how it divides its (tile,
// kv head) pairs among one wave of warps (tma_decode_split, kernels/attention.h; Terra's
// shapes: 32 heads, 4 kv heads, head_dim 64, blocks of 16, block tables 910 wide, 57
// partitions), and which tiles read a shared prefix once a block (plan_shared_blocks,
// backend/cuda/shared_plan.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/shared_plan.h"
#include "kernels/attention.h"

namespace loom {
namespace {

// A decode launch of n_tiles one-slot tiles with a workspace (counters and partials) for
// `space` tiles.
AttentionArgs launch_of(int n_tiles, int space) {
  AttentionArgs a;
  a.heads = 32;
  a.kv_heads = 4;
  a.head_dim = 64;
  a.block_size = 16;
  a.bt_stride = 910;
  a.n_tiles = n_tiles;
  static int counters[1];  // never dereferenced: the split reads the pointers and sizes
  static float partial[1];
  a.mma_counters = counters;
  a.mma_counters_len = size_t(space) * a.kv_heads;
  a.mma_partial = partial;
  a.mma_partial_floats = attention_mma_partial_floats(space, 4, 32, 64, 910, 16);
  return a;
}

TEST_CASE("TMA decode split: one wave of chunks, or whole waves then chunks past them") {
  REQUIRE(attention_mma_max_parts(910, 16) == 57);
  // e4m3 on 132 SMs: 2 blocks of 4 warps an SM, 1,056 warps a wave.
  const int wave = 1056;
  SUBCASE("b256 decode fits one wave: every pair whole") {
    const TmaDecodeSplit w = tma_decode_split(launch_of(256, 256), wave);
    CHECK(w.whole_tiles == 0);
    CHECK(w.z == 1);
  }
  SUBCASE("b64: 4 chunks a pair fill the wave") {
    const TmaDecodeSplit w = tma_decode_split(launch_of(64, 256), wave);
    CHECK(w.whole_tiles == 0);
    CHECK(w.z == 4);
  }
  SUBCASE("b256 with 2 sequences on action slots: 264 tiles whole, 4 in 57 chunks") {
    // 268 tiles = 1,072 pairs: the wave's 1,056 whole, the 16 after it chunked (1,056 / 16 =
    // 66 chunks, at most the 57 partitions a sequence can have).
    const TmaDecodeSplit w = tma_decode_split(launch_of(268, 256), wave);
    CHECK(w.whole_tiles == 264);
    CHECK(w.z == 57);
  }
  SUBCASE("the tail off, or no workspace for the chunked tiles: every pair whole") {
    AttentionArgs a = launch_of(268, 256);
    a.tma_chunk_tail = false;
    const TmaDecodeSplit off = tma_decode_split(a, wave);
    CHECK(off.whole_tiles == 0);
    CHECK(off.z == 1);
    const TmaDecodeSplit small = tma_decode_split(launch_of(268, 3), wave);  // 4 tiles chunked
    CHECK(small.whole_tiles == 0);
    CHECK(small.z == 1);
    AttentionArgs none = launch_of(64, 256);
    none.mma_counters = nullptr;
    CHECK(tma_decode_split(none, wave).z == 1);
  }
  SUBCASE("bf16 (one block an SM, 528 warps): two waves, the second's tiles one chunk each") {
    // 256 tiles = 1,024 pairs: 528 whole (132 tiles), the other 496 pairs fit the second wave
    // whole (528 / 496 = 1 chunk), as before the tail existed.
    const TmaDecodeSplit w = tma_decode_split(launch_of(256, 256), 528);
    CHECK(w.whole_tiles == 132);
    CHECK(w.z == 1);
    // 2 sequences on action slots: two full waves whole, 4 tiles chunked.
    const TmaDecodeSplit act = tma_decode_split(launch_of(268, 256), 528);
    CHECK(act.whole_tiles == 264);
    CHECK(act.z == 33);
  }
}

TEST_CASE("plan_shared_blocks: 4 tiles on the same blocks a block, whole tiles below kv_len") {
  // Blocks of 16 keys (4 a 64-key tile), tables 40 wide, 2 kv heads. Sequences 0-4 start on
  // blocks 100.. : 0, 1 and 3 hold 100-131 (8 tiles), 2 only 100-121 (its 23rd block differs:
  // 5 whole tiles), 4 the same blocks but kv_len 250 (3 whole tiles). 5 is alone; 6 feeds 4
  // slots (4 tiles of one sequence: every cached block shared, kv_len 200: 3 whole tiles);
  // 7 has a context shorter than a tile.
  const int w = 40, bs = 16, kvh = 2;
  std::vector<int32_t> bt(size_t(8) * w, -1);
  auto row = [&](int s, int first, int n) {
    for (int j = 0; j < n; j++) bt[size_t(s) * w + j] = first + j;
  };
  for (int s : {0, 1, 2, 3, 4}) row(s, 100, 32);
  bt[size_t(2) * w + 22] = 999;
  row(5, 300, 20);
  row(6, 500, 14);
  row(7, 700, 3);
  const std::vector<int32_t> kv = {600, 520, 540, 512, 250, 300, 200, 40};
  const std::vector<int32_t> tile_seq = {0, 1, 2, 3, 4, 5, 6, 6, 6, 6, 7};
  const std::vector<int32_t> p = plan_shared_blocks(tile_seq, kv.data(), bt.data(), w, bs, kvh);
  // Block 0: tiles 0-3, 5 tiles (2's blocks; 3's kv_len allows 8); block 1: tiles 6-9
  // (sequence 6), 3 tiles. Each a kv head at a time; then tiles 4, 5 and 10 alone.
  std::vector<int32_t> want;
  for (int h = 0; h < kvh; h++)
    for (int t : {0, 1, 2, 3}) want.insert(want.end(), {t * kvh + h, 5});
  for (int h = 0; h < kvh; h++)
    for (int t : {6, 7, 8, 9}) want.insert(want.end(), {t * kvh + h, 3});
  for (int t : {4, 5, 10})
    for (int h = 0; h < kvh; h++) want.insert(want.end(), {t * kvh + h, 0});
  CHECK(p == want);
  // Tile 4 in place of 3: kv_len 250 holds 3 whole tiles.
  const std::vector<int32_t> q = plan_shared_blocks({0, 1, 2, 4}, kv.data(), bt.data(), w, bs, 1);
  CHECK(q == std::vector<int32_t>{0, 3, 1, 3, 2, 3, 3, 3});
  // Fewer than 4 on the same blocks, or blocks of 48 keys (neither divides 64): no plan.
  CHECK(plan_shared_blocks({0, 1, 2, 5}, kv.data(), bt.data(), w, bs, 1).empty());
  CHECK(plan_shared_blocks({0, 1, 2, 3}, kv.data(), bt.data(), w, 48, 1).empty());
  // 9 tiles on the same blocks: two blocks of 4, then one alone.
  const std::vector<int32_t> nine =
      plan_shared_blocks(std::vector<int32_t>(9, 0), kv.data(), bt.data(), w, bs, 1);
  REQUIRE(nine.size() == 18);
  for (int i = 0; i < 9; i++) {
    CAPTURE(i);
    CHECK(nine[size_t(2 * i)] == i);
    CHECK(nine[size_t(2 * i + 1)] == (i < 8 ? 9 : 0));
  }
}

}  // namespace
}  // namespace loom
