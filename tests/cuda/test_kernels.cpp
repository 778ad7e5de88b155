// RoPE + paged KV write + paged attention (kernels/rope.cuh, kernels/attention.cuh) against the
// CPU references (cpu::rope, cpu::kv_write, cpu::paged_attention in backend/cpu/ops.h) on odd
// sizes (batch 1, 3, 19; head_dim 16 and 64; GQA 1, 3 and 8; contexts that cross 16-slot
// blocks), in fp32 (rel. error ≤ 1e-5) and bf16 (≤ 1e-2). Outputs are poisoned with NaN before
// each run. The other op families have their suites under tests/cuda/ops/; this one moves there
// with the attention family's restructuring.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "backend/cpu/ops.h"
#include "cuda_test_util.h"
#include "kernels/attention.cuh"
#include "kernels/rope.cuh"

using namespace loom;
using namespace loom::gpu;
using namespace loom::test;

static const DType kTypes[] = {DType::F32, DType::BF16};

namespace {

struct AttnCase {
  int heads, kv_heads, head_dim, splits;
  std::vector<std::pair<int, int>> seqs;  // (kv_len, n_new)
};

void run_attention_case(const AttnCase& c, DType t) {
  const int bs = 16, H = c.heads, KV = c.kv_heads, D = c.head_dim;
  const int row = (H + 2 * KV) * D, kv_row = KV * D;
  const float theta = 10000.0f;
  // Block tables: a shuffled pool, so tables are not the identity.
  int total_blocks = 2;
  for (auto [kv, n] : c.seqs) total_blocks += (kv + n + bs - 1) / bs;
  std::vector<int32_t> perm(static_cast<size_t>(total_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
  int bt_stride = 0;
  for (auto [kv, n] : c.seqs) bt_stride = std::max(bt_stride, (kv + n + bs - 1) / bs);
  const int n_seqs = int(c.seqs.size());
  std::vector<int32_t> bt(size_t(n_seqs) * bt_stride, -1), slot_start{0}, kv_len, positions,
      cache_slot, tiles;
  int next = 0;
  const int spt = attention_slots_per_tile(H, KV);
  for (int s = 0; s < n_seqs; s++) {
    const auto [kv, n] = c.seqs[size_t(s)];
    for (int b = 0; b < (kv + n + bs - 1) / bs; b++)
      bt[size_t(s) * bt_stride + b] = perm[size_t(next++)];
    kv_len.push_back(kv);
    for (int j = 0; j < n; j++) {
      positions.push_back(kv + j);
      const int ci = kv + j;
      cache_slot.push_back(bt[size_t(s) * bt_stride + ci / bs] * bs + ci % bs);
    }
    for (int j0 = 0; j0 < n; j0 += spt) tiles.insert(tiles.end(), {s, j0, std::min(spt, n - j0)});
    slot_start.push_back(slot_start.back() + n);
  }
  const int n_slots = slot_start.back(), n_tiles = int(tiles.size() / 3);
  const size_t pool = size_t(total_blocks) * bs * kv_row;
  std::vector<float> kc = random_vec(pool, 21), vc = random_vec(pool, 22);
  std::vector<float> qkv = random_vec(size_t(n_slots) * row, 23, -2, 2);
  if (t == DType::BF16) kc = round_bf16(kc), vc = round_bf16(vc), qkv = round_bf16(qkv);

  // CPU reference, sequence by sequence.
  std::vector<float> ref_k = kc, ref_v = vc, ref_out(size_t(n_slots) * H * D);
  for (int s = 0; s < n_seqs; s++) {
    const auto [kv, n] = c.seqs[size_t(s)];
    std::vector<float> q(size_t(n) * H * D), k(size_t(n) * kv_row), v(size_t(n) * kv_row);
    for (int j = 0; j < n; j++) {
      const float* r = qkv.data() + size_t(slot_start[size_t(s)] + j) * row;
      std::copy_n(r, H * D, q.data() + size_t(j) * H * D);
      std::copy_n(r + H * D, kv_row, k.data() + size_t(j) * kv_row);
      std::copy_n(r + H * D + kv_row, kv_row, v.data() + size_t(j) * kv_row);
    }
    const int32_t* p = positions.data() + slot_start[size_t(s)];
    cpu::rope(q.data(), p, n, H, D, theta);
    cpu::rope(k.data(), p, n, KV, D, theta);
    const int32_t* table = bt.data() + size_t(s) * bt_stride;
    cpu::kv_write(k.data(), v.data(), ref_k.data(), ref_v.data(), table, kv, n, KV, D, bs);
    cpu::paged_attention(q.data(), ref_k.data(), ref_v.data(), table, kv, n, H, KV, D, bs,
                         ref_out.data() + size_t(slot_start[size_t(s)]) * H * D);
  }

  std::vector<float> inv(static_cast<size_t>(D / 2));
  for (int j = 0; j < D / 2; j++) inv[size_t(j)] = 1.0f / std::pow(theta, float(2 * j) / float(D));
  DevBuf dqkv = upload(qkv, t), dk = upload(kc, t), dv = upload(vc, t),
         dinv = upload(inv, DType::F32), dpos = upload_ints(positions),
         dcs = upload_ints(cache_slot), dbt = upload_ints(bt), dkv = upload_ints(kv_len),
         dss = upload_ints(slot_start), dtiles = upload_ints(tiles);
  const size_t blocks = size_t(n_tiles) * KV * c.splits;
  DevBuf po(attention_partial_floats(blocks, D) * 4), pml(blocks * kAttnRows * 2 * 4);
  DevBuf out(size_t(n_slots) * H * D * 4);
  out.poison();
  po.poison();
  pml.poison();
  RopeKvArgs r;
  r.t = t;
  r.qkv = dqkv.get();
  r.positions = dpos.as<int32_t>();
  r.cache_slot = dcs.as<int32_t>();
  r.inv_freq = dinv.as<float>();
  r.n_slots = n_slots;
  r.heads = H;
  r.kv_heads = KV;
  r.head_dim = D;
  r.k_cache = dk.get();
  r.v_cache = dv.get();
  LOOM_KERNEL(rope_kv_write(r, nullptr));
  AttentionArgs a;
  a.t = t;
  a.qkv = dqkv.get();
  a.k_cache = dk.get();
  a.v_cache = dv.get();
  a.block_tables = dbt.as<int32_t>();
  a.bt_stride = bt_stride;
  a.kv_len = dkv.as<int32_t>();
  a.slot_start = dss.as<int32_t>();
  a.tiles = dtiles.as<int32_t>();
  a.n_tiles = n_tiles;
  a.heads = H;
  a.kv_heads = KV;
  a.head_dim = D;
  a.block_size = bs;
  a.num_splits = c.splits;
  a.partial_o = po.as<float>();
  a.partial_ml = pml.as<float>();
  a.out = out.get();
  LOOM_KERNEL(paged_attention(a, nullptr));
  CHECK(rel_err(download(dk, pool, t), ref_k) < tolerance(t));
  CHECK(rel_err(download(dv, pool, t), ref_v) < tolerance(t));
  CHECK(rel_err(download(out, ref_out.size(), t), ref_out) < tolerance(t));
  // The decode kernel on the same (already written) cache, where every tile is one slot.
  if (n_tiles == n_slots && H / KV <= kDecodeMaxG) {
    out.poison();
    po.poison();
    pml.poison();
    a.decode = true;
    LOOM_KERNEL(paged_attention(a, nullptr));
    CHECK(rel_err(download(out, ref_out.size(), t), ref_out) < tolerance(t));
    // ... and with RoPE and the KV write fused in, from the unrotated qkv and the old cache.
    DevBuf qkv2 = upload(qkv, t), k2 = upload(kc, t), v2 = upload(vc, t);
    out.poison();
    a.qkv = qkv2.get();
    a.k_cache = k2.get();
    a.v_cache = v2.get();
    a.fuse_rope = true;
    a.positions = dpos.as<int32_t>();
    a.cache_slot = dcs.as<int32_t>();
    a.inv_freq = dinv.as<float>();
    LOOM_KERNEL(paged_attention(a, nullptr));
    CHECK(rel_err(download(out, ref_out.size(), t), ref_out) < tolerance(t));
    CHECK(rel_err(download(k2, pool, t), ref_k) < tolerance(t));
    CHECK(rel_err(download(v2, pool, t), ref_v) < tolerance(t));
  }
}

}  // namespace

TEST_CASE("rope_kv_write + paged_attention match cpu rope, kv_write, paged_attention") {
  const std::vector<std::pair<int, int>> mixed = {{0, 19}, {37, 1}, {5, 7}, {16, 3}};
  const std::vector<AttnCase> cases = {
      {4, 4, 16, 1, mixed},                         // GQA 1, head_dim 16
      {6, 2, 16, 3, mixed},                         // GQA 3 (the tiny models), combine path
      {32, 4, 64, 1, mixed},                        // Terra's heads, GQA 8
      {32, 4, 64, 4, mixed},                        // ... with splits
      {32, 4, 64, 7, {{700, 1}, {1, 1}, {63, 1}}},  // decode batch 3 across many blocks
      {32, 4, 64, 64, {{14000, 1}}},                // Terra's longest context, 55 splits
      {6, 2, 16, 4, {{600, 1}, {3, 1}}},            // decode GQA 3, head_dim 16
      {4, 4, 16, 1, {{300, 1}}},                    // decode GQA 1, one split of two passes
      {8, 8, 64, 2, {{0, 40}, {31, 2}}},            // GQA 1, prefill tiles of 32 slots
      {32, 4, 64, 5, {{300, 9}, {0, 200}}},         // long prefill: splits + combine, rows
                                                    // with no key in early/late splits
  };
  // Batch 19 decode: contexts 0, 37, 74, ... cross many block boundaries.
  AttnCase b19{32, 4, 64, 8, {}};
  for (int i = 0; i < 19; i++) b19.seqs.push_back({37 * i, 1});
  std::vector<AttnCase> all = cases;
  all.push_back(b19);
  for (DType t : kTypes)
    for (const AttnCase& c : all) {
      CAPTURE(dtype_name(t));
      CAPTURE(c.heads);
      CAPTURE(c.kv_heads);
      CAPTURE(c.head_dim);
      CAPTURE(c.splits);
      run_attention_case(c, t);
    }
}
