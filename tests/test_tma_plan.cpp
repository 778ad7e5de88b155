// The TMA decode kernel's host-side plans, checked in every build: how it divides its (tile,
// kv head) pairs among one wave of warps (tma_decode_split, kernels/attention.h; Terra's
// shapes: 32 heads, 4 kv heads, head_dim 64, blocks of 16, block tables 910 wide, 57
// partitions), and which tiles read a shared prefix once a group (plan_shared_prefixes,
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

TEST_CASE(
    "plan_shared_prefixes: groups of tiles on the same blocks, whole partitions below kv_len") {
  // Blocks of 64 keys (4 a partition), tables 12 wide. Sequences 0-2 share blocks 100-107 (2
  // partitions), 2 only up to block 105 (its 7th differs: partition 1 is not whole for it);
  // 3 shares 100-103 but its kv_len 500 holds 1 whole partition; 4 is alone; 5 feeds 3 slots
  // (3 tiles, its own 7 cached blocks: 1 whole partition below kv_len 448); 6 has a context
  // shorter than a partition.
  const int w = 12, bs = 64;
  std::vector<int32_t> bt(size_t(7) * w, -1);
  auto row = [&](int s, std::vector<int32_t> ids) {
    std::copy(ids.begin(), ids.end(), bt.begin() + size_t(s) * w);
  };
  row(0, {100, 101, 102, 103, 104, 105, 106, 107, 108});
  row(1, {100, 101, 102, 103, 104, 105, 106, 107, 110, 111});
  row(2, {100, 101, 102, 103, 104, 105, 120, 121, 122});
  row(3, {100, 101, 102, 103, 130, 131, 132, 133});
  row(4, {200, 201, 202, 203, 204});
  row(5, {300, 301, 302, 303, 304, 305, 306, 307});
  row(6, {400, 401});
  const std::vector<int32_t> kv = {540, 600, 530, 500, 300, 448, 100};
  const std::vector<int32_t> tile_seq = {0, 1, 2, 3, 4, 5, 5, 5, 6};
  const SharedPrefixPlan p = plan_shared_prefixes(tile_seq, kv.data(), bt.data(), w, bs, 64, 1024);
  // Group 0: tiles 0-3 (first block 100), 1 whole partition (3's kv_len, 2's blocks allow 1);
  // group 1: tiles 5-7 (sequence 5), 1 partition (448 / 256).
  REQUIRE(p.n_groups() == 2);
  const std::vector<int32_t> g0 = {4, 0, 1, 2, 3, -1, -1, -1, -1};
  const std::vector<int32_t> g1 = {3, 5, 6, 7, -1, -1, -1, -1, -1};
  CHECK(std::vector<int32_t>(p.groups.begin(), p.groups.begin() + 9) == g0);
  CHECK(std::vector<int32_t>(p.groups.begin() + 9, p.groups.end()) == g1);
  CHECK(p.items == std::vector<int32_t>{2, 0, 0, 1, 0});
  CHECK(p.own == std::vector<int32_t>{1, 1, 1, 1, 0, 1, 1, 1, 0});
  // Without sequence 3 the first group keeps 2 partitions for 0 and 1, but 2's table differs
  // in partition 1: still 1.
  const SharedPrefixPlan q = plan_shared_prefixes({0, 1}, kv.data(), bt.data(), w, bs, 64, 1024);
  CHECK(q.items == std::vector<int32_t>{2, 0, 0, 0, 1});
  CHECK(q.own == std::vector<int32_t>{2, 2});
  // No room: one group at most, then one item at most (the group that would pass it is left
  // out, its tiles read everything themselves).
  const SharedPrefixPlan one = plan_shared_prefixes(tile_seq, kv.data(), bt.data(), w, bs, 1, 1024);
  CHECK(one.n_groups() == 1);
  CHECK(one.own == std::vector<int32_t>{1, 1, 1, 1, 0, 0, 0, 0, 0});
  const SharedPrefixPlan none = plan_shared_prefixes({0, 1}, kv.data(), bt.data(), w, bs, 64, 1);
  CHECK(none.items == std::vector<int32_t>{0});
  CHECK(none.own == std::vector<int32_t>{0, 0});
  // 9 tiles on the same blocks: a group of 8, then one left alone.
  const std::vector<int32_t> nine(9, 1);
  const SharedPrefixPlan big = plan_shared_prefixes(nine, kv.data(), bt.data(), w, bs, 64, 1024);
  CHECK(big.n_groups() == 1);
  CHECK(big.own == std::vector<int32_t>{2, 2, 2, 2, 2, 2, 2, 2, 0});
}

}  // namespace
}  // namespace loom
