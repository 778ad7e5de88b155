// The TMA decode kernel's host logic (kernels/attention.h), checked in every build: how it
// divides its (tile, kv head) pairs among one wave of warps (tma_decode_split; Terra's shapes:
// 32 heads, 4 kv heads, head_dim 64, blocks of 16, block tables 910 wide, 57 partitions), and
// when a step's sequences share cache blocks (tiles_share_blocks).
#include <doctest/doctest.h>

#include <vector>

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
    CHECK(w.partials);  // (the staggered pairs of a step sharing blocks store theirs)
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
    CHECK_FALSE(small.partials);
    AttentionArgs none = launch_of(64, 256);
    none.mma_counters = nullptr;
    CHECK(tma_decode_split(none, wave).z == 1);
    CHECK_FALSE(tma_decode_split(none, wave).partials);
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

TEST_CASE("tma_one_block_an_sm: pairs that two blocks an SM would cut in two run whole") {
  // e4m3 on 132 SMs, blocks of 4 warps, 2 an SM: 1,056 warps; at one an SM 528.
  auto one = [](int n_tiles, int per_sm = 2) {
    return tma_one_block_an_sm(launch_of(n_tiles, 256), per_sm, 132, 4);
  };
  CHECK(one(128));  // 512 pairs: 2 chunks a pair at 1,056 warps
  CHECK(tma_decode_split(launch_of(128, 256), 528).z == 1);  // whole at one block an SM
  CHECK(tma_decode_split(launch_of(128, 256), 528).whole_tiles == 0);
  CHECK(one(96));       // 384 pairs: 1,056 / 384 = 2 chunks
  CHECK(one(89));       // 356 pairs: 2
  CHECK(!one(88));      // 352 pairs: 3 chunks, left as they are
  CHECK(one(132));      // 528 pairs: 2 chunks; at one block an SM they fill the 528 warps
  CHECK(!one(133));     // 532 pairs: one chunk a pair already
  CHECK(!one(256));     // whole at two blocks an SM
  CHECK(!one(64));      // 4 chunks a pair
  CHECK(!one(128, 1));  // one block an SM fits (bf16's 2-stage blocks): nothing to change
  AttentionArgs capped = launch_of(128, 256);
  capped.tma_blocks_per_sm = 1;  // asked for one already
  CHECK(!tma_one_block_an_sm(capped, 2, 132, 4));
  AttentionArgs none = launch_of(128, 256);
  none.mma_counters = nullptr;  // no workspace: every pair whole anyway
  CHECK(!tma_one_block_an_sm(none, 2, 132, 4));
}

TEST_CASE("tma_stagger_parts: c times the shared prefix's partitions, at most the rest") {
  // 1,746 shared keys are 7 partitions (the last one partly shared).
  CHECK(tma_stagger_parts(1746, 31, 1) == 7);   // ctx 8000
  CHECK(tma_stagger_parts(1746, 31, 3) == 21);  // class 3 of 4
  CHECK(tma_stagger_parts(1746, 31, 4) == 24);  // at most the 24 past the prefix
  CHECK(tma_stagger_parts(1746, 12, 1) == 5);   // ctx 3000: 5 past the prefix
  CHECK(tma_stagger_parts(1746, 7, 1) == 0);    // nothing past it
  CHECK(tma_stagger_parts(0, 31, 1) == 0);      // nothing shared
  CHECK(tma_stagger_parts(1746, 31, 0) == 0);   // class 0 is never staggered
}

TEST_CASE("tiles_share_blocks: two sequences on the same first block with a whole tile cached") {
  // Tables 4 wide. Sequences 0 and 2 start on block 7 (2 with a context under a tile at
  // first), 1 on block 9 with 3 one-slot tiles (a frame's action slots: one sequence, not a
  // share), 3 on block 11.
  const std::vector<int32_t> bt = {7, 8, -1, -1, 9, 10, -1, -1, 7, 8, 12, -1, 11, -1, -1, -1};
  std::vector<int32_t> kv = {100, 80, 40, 64};
  auto tiles_of = [](std::vector<int32_t> seqs) {
    std::vector<int32_t> t;
    for (int s : seqs) t.insert(t.end(), {s, 0, 1});
    return t;
  };
  const std::vector<int32_t> all = tiles_of({0, 1, 1, 1, 2, 3});
  CHECK(!tiles_share_blocks(all.data(), 6, kv.data(), bt.data(), 4));  // 2: 40 keys
  kv[2] = 64;
  CHECK(tiles_share_blocks(all.data(), 6, kv.data(), bt.data(), 4));
  const std::vector<int32_t> apart = tiles_of({1, 1, 1, 2, 3});
  CHECK(!tiles_share_blocks(apart.data(), 5, kv.data(), bt.data(), 4));
  CHECK(!tiles_share_blocks(all.data(), 4, kv.data(), bt.data(), 4));  // tiles 0-3: 0, 1, 1, 1
}

TEST_CASE("tiles_group_prefix: most sets of 4 tiles share a third of their first's tiles") {
  // 8 sequences, tables 16 wide, blocks of 64 keys (a tile each). Set 0 (sequences 0-3) shares
  // blocks 0-2 of sequence 0 (3 tiles, under a third of its 10); set 1 (4-7) shares 4 blocks.
  const int w = 16;
  std::vector<int32_t> bt(size_t(8 * w));
  for (int s = 0; s < 8; s++)
    for (int j = 0; j < w; j++) bt[size_t(s * w + j)] = 100 * s + j;
  auto share = [&](int first, int n, int blocks) {
    for (int s = first + 1; s < first + n; s++)
      for (int j = 0; j < blocks; j++) bt[size_t(s * w + j)] = bt[size_t(first * w + j)];
  };
  share(0, 4, 3);
  share(4, 4, 4);
  std::vector<int32_t> kv(8, 600), tiles;  // contexts of 600 keys: 10 tiles, a third is 3.33
  for (int s = 0; s < 8; s++) tiles.insert(tiles.end(), {s, 0, 1});
  CHECK(tiles_group_prefix(tiles.data(), 8, kv.data(), bt.data(), w, 64));   // set 1 of 2
  CHECK(!tiles_group_prefix(tiles.data(), 4, kv.data(), bt.data(), w, 64));  // set 0 alone
  kv[5] = 200;  // a member's old keys end inside the prefix: 3 whole tiles of them
  CHECK(!tiles_group_prefix(tiles.data(), 8, kv.data(), bt.data(), w, 64));
  kv[5] = 600;
  share(0, 4, 4);  // both sets share 4 blocks; 4 tiles of 16 are under a third
  kv.assign(8, 1000);
  CHECK(!tiles_group_prefix(tiles.data(), 8, kv.data(), bt.data(), w, 64));
  CHECK(!tiles_group_prefix(tiles.data(), 1, kv.data(), bt.data(), w, 64));  // no set of 2
  kv.assign(8, 150);  // 3 tiles, 2 of them shared: a third, but a group needs kTmaGroupSlots
  CHECK(tiles_group_prefix(tiles.data(), 8, kv.data(), bt.data(), w, 64) == (kTmaGroupSlots <= 2));
}

}  // namespace
}  // namespace loom
