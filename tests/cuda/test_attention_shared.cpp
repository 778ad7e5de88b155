// The TMA decode kernel's work split (kernels/attention_tma.cu) against the prefill kernel,
// bitwise, bf16 and e4m3 caches:
//  - past one wave of warps: the full waves' (tile, kv head) pairs whole, the tiles after them
//    in chunks (tma_decode_split), and every pair whole without the chunked tail;
//  - 256 sequences in sets of 8 whose first 7 hold the first one's blocks for their first keys
//    (prefix sharing), every config (config 4: bf16 on one stage a warp, two blocks an SM, the
//    backend's choice for such steps past one wave: tma_shared_kv), and as the backend runs
//    such steps (tma_shared_kv), the pairs in 1 (none staggered), 2 or 4 stagger classes, bf16
//    in group blocks (4 tiles of a kv head reading the blocks they share once), counted.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>

#include "attention_world.h"

TEST_CASE("TMA decode past one wave of warps: whole pairs, then chunks, the prefill bits") {
  // 2 SMs' worth of tiles past one wave of 2 blocks of 4 warps an SM (e4m3, and bf16 config 4:
  // one stage a warp) and past two waves of 1 block (bf16 config 0: 2 stages): the full waves'
  // (tile, kv head) pairs a warp each, the 4 tiles after
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
    for (int cfg : {0, 4})
      for (bool tail : {true, false}) {
        CAPTURE(cfg);
        CAPTURE(tail);
        const std::vector<uint16_t> dec = run_step(w, es, true, true, DK::Tma, cfg, tail);
        bool same = true;
        for (int s = 0; s < n && same; s++)
          same = same_row(dec, s, pre, s, 32, 64, "past one wave: TMA vs prefill",
                          lens[size_t(s)] - 1);
        CHECK(same);
      }
  }
}

TEST_CASE("TMA decode of sequences sharing blocks, every config: the prefill bits") {
  // 256 sequences: 1,024 pairs (bf16: past one wave of 2-stage blocks; e4m3: one wave).
  const int n = 256;
  std::vector<int> lens;
  for (int i = 0; i < n; i++) lens.push_back(1760 + (i * 37) % 300);
  for (float fp8_scale : {0.0f, 1.0f / 64}) {
    CAPTURE(fp8_scale);
    World w(32, 4, 64, 16, lens, 29, fp8_scale);
    share_prefix(w, n);
    std::vector<Entry> es;
    for (int i = 0; i < n; i++) es.push_back({i, lens[size_t(i)] - 1, 1});
    const std::vector<uint16_t> pre = run_step(w, es, false);
    for (int cfg = 0; cfg < kTmaDecodeConfigs; cfg++) {
      CAPTURE(cfg);
      const std::vector<uint16_t> dec = run_step(w, es, true, true, DK::Tma, cfg);
      bool same = true;
      for (int s = 0; s < n && same; s++)
        same =
            same_row(dec, s, pre, s, 32, 64, "shared blocks: TMA vs prefill", lens[size_t(s)] - 1);
      CHECK(same);
    }
    // As the backend runs them (tma_shared_kv: every pair whole on one wave of one-stage
    // warps; the tiles 8 c .. 8 c + 7 in class c % stagger take their last partitions first,
    // c times as many as the prefix they share with their neighbour t ^ 1 holds, stored in the
    // partials and merged last), config 0 and one stage a warp, 1 (none), 2 and 4 classes. The
    // partitions stored say the staggered path ran, for the pairs it should, with the shared
    // prefix found on the device.
    // bf16's one-stage blocks are group blocks: 4 tiles of a kv head, the whole tiles of old
    // keys in the cached blocks all 4 share read once for them (kTmaGroupSlots or more; the
    // groups of 8 here share 1,746, 100, 256 or 1,000 keys, all but their last member).
    auto shared_blocks = [&](int t, int o) {  // leading blocks tiles t and o have in common
      const int blocks = (std::min(lens[size_t(t)], lens[size_t(o)]) - 1) / 16 + 1;
      int shared = 0;
      while (shared < blocks && w.tables[size_t(t) * w.bt_stride + size_t(shared)] ==
                                    w.tables[size_t(o) * w.bt_stride + size_t(shared)])
        shared++;
      return shared;
    };
    int expect_group = 0;
    for (int t0 = 0; t0 < n && fp8_scale == 0.0f; t0 += 4) {
      int tiles = INT_MAX;
      for (int t = t0; t < std::min(n, t0 + 4); t++)
        tiles = std::min(tiles, std::min(shared_blocks(t, t0) * 16, lens[size_t(t)] - 1) / 64);
      expect_group += 4 * (tiles >= kTmaGroupSlots ? tiles : 0);
    }
    CHECK((fp8_scale == 0.0f) == (expect_group > 0));
    for (int cfg : {0, 4})
      for (int stagger : {1, 2, 4}) {
        CAPTURE(cfg);
        CAPTURE(stagger);
        int expect = 0;
        for (int t = 0; t < n; t++) {
          const int p = lens[size_t(t)] - 1, c = (t / 8) % stagger;
          expect +=
              c ? 4 * tma_stagger_parts(shared_blocks(t, t ^ 1) * 16, p / kMmaPartKeys + 1, c) : 0;
        }
        CHECK((stagger == 1) == (expect == 0));  // most staggered tiles share a prefix
        int stored = -1, group_tiles = -1;
        const std::vector<uint16_t> dec =
            run_step(w, es, true, true, DK::Tma, cfg, true, stagger, &stored, &group_tiles);
        CHECK(stored == expect);
        CHECK(group_tiles == expect_group);
        bool same = true;
        for (int s = 0; s < n && same; s++)
          same = same_row(dec, s, pre, s, 32, 64, "staggered: TMA vs prefill", lens[size_t(s)] - 1);
        CHECK(same);
      }
  }
}
