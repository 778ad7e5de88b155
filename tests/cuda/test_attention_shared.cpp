// The TMA decode kernel's work plans (kernels/attention_tma.cu) against the prefill kernel,
// bitwise, bf16 and e4m3 caches:
//  - past one wave of warps: the full waves' (tile, kv head) pairs whole, the tiles after them
//    in chunks (tma_decode_split), and every pair whole without the chunked tail;
//  - a shared prefix read once a group: groups of 8 sequences holding the same blocks for
//    their first 1,746 keys, the group kernel computing each member's partials of the 6 whole
//    partitions there, the members' own warps the rest (chunked, z = 4, and one chunk a
//    sequence), and the tiles in the whole region reading everything themselves.
#include <doctest/doctest.h>

#include "attention_world.h"

namespace {

// World w's sequences 0 .. n-1 in groups of `group`, each holding its group's first
// sequence's blocks for its first `shared` keys (prefix sharing), and the backend's plan for a
// decode step of them (plan_shared_prefixes: the whole partitions of those keys once a group).
SharedPrefixPlan share_prefix(World& w, int n, int group, int shared) {
  std::vector<int32_t> tile_seq(static_cast<size_t>(n)), kv_len(tile_seq.size());
  for (int s = 0; s < n; s++) {
    const int lead = s - s % group;
    for (int j = 0; s != lead && j < shared / w.bs; j++)
      w.tables[size_t(s) * w.bt_stride + j] = w.tables[size_t(lead) * w.bt_stride + j];
    tile_seq[size_t(s)] = s;
    kv_len[size_t(s)] = w.lens[size_t(s)] - 1;
  }
  return plan_shared_prefixes(tile_seq, kv_len.data(), w.tables.data(), w.bt_stride, w.bs, n,
                              1 << 20);
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

TEST_CASE("TMA decode reads a group's shared prefix once: the prefill bits") {
  // 64 sequences (256 pairs: 4 chunks each) and 136 (544: one chunk each in e4m3; in bf16
  // past the wave of 528 warps, so 132 tiles whole, reading their shared keys themselves).
  // Contexts 1,760 .. 2,059: the shared 1,746 keys hold 6 whole partitions and part of the
  // 7th, which the members read themselves.
  for (int n : {64, 136})
    for (float fp8_scale : {0.0f, 1.0f / 64}) {
      if (n == 136 && fp8_scale > 0) continue;  // (the largest world once)
      CAPTURE(n);
      CAPTURE(fp8_scale);
      std::vector<int> lens;
      for (int i = 0; i < n; i++) lens.push_back(1760 + (i * 37) % 300);
      World w(32, 4, 64, 16, lens, 29, fp8_scale);
      const SharedPrefixPlan plan = share_prefix(w, n, 8, 1746);
      REQUIRE(plan.items[0] == (n + 7) / 8 * 6);
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
    }
}
