// The TMA decode kernel's work plans (kernels/attention_tma.cu) against the prefill kernel,
// bitwise, bf16 and e4m3 caches:
//  - past one wave of warps: the full waves' (tile, kv head) pairs whole, the tiles after them
//    in chunks (tma_decode_split), and every pair whole without the chunked tail;
//  - a shared prefix read once a block: sets of 7 sequences holding the same blocks for their
//    first keys (100 to 1,746), 4 of each set a block of warps reading those tiles once from
//    the block's shared ring, the other 3 reading everything themselves; and a plan that lies
//    (sequences with different blocks in one block), whose members get the first one's keys.
#include <doctest/doctest.h>

#include "attention_world.h"

namespace {

// World w's sequences 0 .. n-1 in sets of 8 whose first 7 hold their set's first sequence's
// blocks for its first keys: 1,746 (27 whole 64-key tiles), 100 (1), 256 (4: the shared
// ring's stages) or 1,000 (15) by set; and the backend's plan for a decode step of them.
std::vector<int32_t> share_prefix(World& w, int n) {
  std::vector<int32_t> tile_seq(static_cast<size_t>(n)), kv_len(tile_seq.size());
  for (int s = 0; s < n; s++) {
    const int lead = s - s % 8, shared = std::vector<int>{1746, 100, 256, 1000}[(s / 8) % 4];
    for (int j = 0; s != lead && s % 8 != 7 && j < (shared + w.bs - 1) / w.bs; j++)
      w.tables[size_t(s) * w.bt_stride + j] = w.tables[size_t(lead) * w.bt_stride + j];
    tile_seq[size_t(s)] = s;
    kv_len[size_t(s)] = w.lens[size_t(s)] - 1;
  }
  return plan_shared_blocks(tile_seq, kv_len.data(), w.tables.data(), w.bt_stride, w.bs, w.KV);
}

}  // namespace

TEST_CASE("TMA decode past one wave of warps: whole pairs, then chunks, the prefill bits") {
  // 2 SMs' worth of tiles past two waves of bf16 warps (a block of 4 an SM) and one of e4m3's
  // (2 blocks an SM): the full waves' (tile, kv head) pairs a warp each, the 4 tiles after
  // them in chunks folded by the last (tma_chunk_tail; without it, whole: a wave more). The
  // chunked tiles' contexts are long (many partitions a chunk), the others short to keep the
  // world small.
  int sms = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int n = 2 * sms + 4;
  std::vector<int> lens;
  for (int i = 0; i < n; i++) lens.push_back(i < n - 8 ? (i * 97) % 300 + 1 : 1800 + 97 * (i % 8));
  for (float fp8_scale : {0.0f, 1.0f / 64}) {
    CAPTURE(fp8_scale);
    const World w(32, 4, 64, 16, lens, 23, fp8_scale);
    std::vector<Entry> es;
    for (int i = 0; i < n; i++) es.push_back({i, lens[size_t(i)] - 1, 1});
    const std::vector<uint16_t> pre = run_step(w, es, false);
    for (bool tail : {true, false}) {
      CAPTURE(tail);
      const std::vector<uint16_t> dec = run_step(w, es, true, true, DK::Tma, 0, tail);
      bool same = true;
      for (int s = 0; s < n && same; s++)
        same =
            same_row(dec, s, pre, s, 32, 64, "past one wave: TMA vs prefill", lens[size_t(s)] - 1);
      CHECK(same);
    }
  }
}

TEST_CASE("TMA decode reads a block's shared prefix once: the prefill bits") {
  // 256 sequences: 1,024 pairs, every pair whole (e4m3: one wave; bf16: two, the second a
  // chunked tail of one chunk a pair), so the plan runs in both.
  const int n = 256;
  std::vector<int> lens;
  for (int i = 0; i < n; i++) lens.push_back(1760 + (i * 37) % 300);
  for (float fp8_scale : {0.0f, 1.0f / 64}) {
    CAPTURE(fp8_scale);
    World w(32, 4, 64, 16, lens, 29, fp8_scale);
    const std::vector<int32_t> plan = share_prefix(w, n);
    // 32 sets: a block of 4 sharing warps for each kv head, first in the plan.
    REQUIRE(plan.size() == size_t(2 * n * 4));
    int sharing = 0;
    while (plan[size_t(2 * sharing + 1)] > 0) sharing++;
    CHECK(sharing == 32 * 4 * 4);
    CHECK(plan[1] == 27);
    CHECK(plan[2 * 16 + 1] == 1);
    std::vector<Entry> es;
    for (int i = 0; i < n; i++) es.push_back({i, lens[size_t(i)] - 1, 1});
    const std::vector<uint16_t> pre = run_step(w, es, false);
    const std::vector<uint16_t> once = run_step(w, es, true, true, DK::Tma, 0, true, &plan);
    const std::vector<uint16_t> each = run_step(w, es, true, true, DK::Tma);
    bool same = true;
    for (int s = 0; s < n && same; s++)
      same = same_row(once, s, pre, s, 32, 64, "shared prefix once: TMA vs prefill",
                      lens[size_t(s)] - 1) &&
             same_row(each, s, pre, s, 32, 64, "shared blocks, each its own: TMA vs prefill",
                      lens[size_t(s)] - 1);
    CHECK(same);
    // A plan that lies: the set-less sequences 7, 15, 23, 31 (each its own blocks) as one
    // sharing block of 27 tiles a kv head, every other pair alone. The kernel reads its ring,
    // so 15, 23 and 31 get 7's first 1,728 keys.
    const int seqs[4] = {7, 15, 23, 31};
    std::vector<int32_t> lie;
    for (int h = 0; h < 4; h++)
      for (int m : seqs) lie.insert(lie.end(), {m * 4 + h, 27});
    for (int t = 0; t < n; t++)
      for (int h = 0; h < 4 && (t % 8 != 7 || t > 31); h++) lie.insert(lie.end(), {t * 4 + h, 0});
    REQUIRE(lie.size() == plan.size());
    const std::vector<uint16_t> lied = run_step(w, es, true, true, DK::Tma, 0, true, &lie);
    const size_t row = size_t(32) * 64;
    auto differs = [&](int s) {
      return std::memcmp(lied.data() + s * row, pre.data() + s * row, row * 2) != 0;
    };
    CHECK(!differs(7));
    CHECK(differs(15));
    CHECK(differs(23));
    CHECK(differs(31));
  }
}
