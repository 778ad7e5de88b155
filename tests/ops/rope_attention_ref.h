// The KV families' references (kernels/rope.h, attention.h, kv_fp8.h) against hand-computed
// values. A header of test cases: tests/test_ops_ref.cpp runs it in every build,
// tests/cuda/ops/test_rope_attention.cpp beside the kernel checks.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kv_fp8.h"
#include "kernels/rope.h"

TEST_CASE("cpu::rope_kv_write: rotation, the cache rows it writes, the FP8 round trip") {
  using namespace loom;
  // head_dim 2, one q and one kv head, position 2, inv_freq 0.5: angle 1.
  for (bool fp8 : {false, true}) {
    CAPTURE(fp8);
    std::vector<float> qkv = {1, 2, 3, 0, 5, -7};  // q, k, v
    const std::vector<int32_t> pos = {2}, slot = {1};
    const std::vector<float> inv = {0.5f}, scales = {0.5f, 0.25f};  // K, V
    std::vector<float> kc(4, -1.0f), vc(4, -1.0f);                  // rows 0 and 1
    RopeKvArgs a;
    a.t = DType::F32;
    a.kv_fp8 = fp8;
    a.kv_scale = scales.data();
    a.qkv = qkv.data();
    a.positions = pos.data();
    a.cache_slot = slot.data();
    a.inv_freq = inv.data();
    a.n_slots = 1, a.heads = 1, a.kv_heads = 1, a.head_dim = 2;
    a.k_cache = kc.data();
    a.v_cache = vc.data();
    cpu::rope_kv_write(a);
    const double c = std::cos(1.0), s = std::sin(1.0);
    CHECK(qkv[0] == doctest::Approx(1 * c - 2 * s).epsilon(1e-6));  // q rotated in place
    CHECK(qkv[1] == doctest::Approx(2 * c + 1 * s).epsilon(1e-6));
    CHECK(qkv[2] == 3.0f);  // k stays unrotated in qkv
    CHECK(kc[0] == -1.0f);  // row 0 untouched
    CHECK(vc[1] == -1.0f);
    if (!fp8) {
      CHECK(kc[2] == doctest::Approx(3 * c).epsilon(1e-6));
      CHECK(kc[3] == doctest::Approx(3 * s).epsilon(1e-6));
      CHECK(vc[2] == 5.0f);
      CHECK(vc[3] == -7.0f);
    } else {
      // 3c / 0.5 = 3.24 → 3.25 (quantum 0.25), 3s / 0.5 = 5.05 → 5 (quantum 0.5), times 0.5;
      // 5 / 0.25 = 20 and −7 / 0.25 = −28 are codes.
      CHECK(kc[2] == 1.625f);
      CHECK(kc[3] == 2.5f);
      CHECK(vc[2] == 5.0f);
      CHECK(vc[3] == -7.0f);
    }
  }
  CHECK(rope_inv_freq(4, 100.0f, true) == std::vector<float>{1.0f, 0.1f});
  CHECK(rope_inv_freq(4, 100.0f, false) == std::vector<float>{0.0f, 0.0f});
}

TEST_CASE("cpu::paged_attention: a softmax of (0, ln 3) over values (4, 8) gives 7") {
  using namespace loom;
  // head_dim 1 (scale 1), one head; the cache's two keys in block 1 of a 2-slot-block pool; the
  // new slot sits at index 1 and sees both. A second tile: a sequence at index 0 sees only key 0.
  const std::vector<float> qkv = {1, 0, 0, 1, 0, 0};  // [2 slots, q k v]
  const std::vector<float> kc = {9, 9, 0, std::log(3.0f)}, vc = {9, 9, 4, 8};
  const std::vector<int32_t> bt = {1, 1}, kv_len = {1, 0}, slot_start = {0, 1, 2};
  const std::vector<int32_t> tiles = {0, 0, 1, 1, 0, 1};
  std::vector<float> out(2, -1.0f);
  AttentionArgs a;
  a.t = DType::F32;
  a.qkv = qkv.data();
  a.k_cache = kc.data();
  a.v_cache = vc.data();
  a.block_tables = bt.data();
  a.bt_stride = 1;
  a.kv_len = kv_len.data();
  a.slot_start = slot_start.data();
  a.tiles = tiles.data();
  a.n_tiles = 2, a.heads = 1, a.kv_heads = 1, a.head_dim = 1, a.block_size = 2;
  a.out = out.data();
  cpu::paged_attention(a);
  CHECK(out[0] == doctest::Approx(7.0).epsilon(1e-6));
  CHECK(out[1] == 4.0f);
}

TEST_CASE("cpu::kv_stats: maxima per kv head and side, saturation counts") {
  using namespace loom;
  // 2 kv heads of dim 1; rows 0 and 2 written (slot -1 skipped).
  const std::vector<float> kc = {1, -5, 100, 100, 2, 3}, vc = {-0.5f, 0, 100, 100, 4, -6};
  const std::vector<int32_t> slot = {0, -1, 2};
  const std::vector<float> scales = {1.0f / 256, 1, 1, 1.0f / 256};  // K h0, h1, V h0, h1
  std::vector<float> absmax(4, 0.0f);
  unsigned long long counts[2] = {0, 0};
  KvStatsArgs a;
  a.t = DType::F32;
  a.k_cache = kc.data();
  a.v_cache = vc.data();
  a.cache_slot = slot.data();
  a.n_slots = 3, a.kv_heads = 2, a.head_dim = 1;
  a.absmax = absmax.data();
  a.scales = scales.data();
  a.counts = counts;
  cpu::kv_stats(a);
  CHECK(absmax == std::vector<float>{2, 5, 4, 6});
  CHECK(counts[0] == 8);
  CHECK(counts[1] == 2);  // K h0: 2 · 256 > 448 (not 1); V h1: 6 · 256
}
