// The KV families (kernels/rope.h: RoPE + paged KV write, kernels/attention.h: paged attention)
// against their references with the same argument structs, on odd sizes (batch 1, 3, 19;
// head_dim 16 and 64; GQA 1, 3 and 8; contexts that cross 16-slot blocks), in fp32 (rel.
// error ≤ 1e-5) and bf16 (≤ 1e-2), each with the cache in the compute dtype and in FP8 (the
// reference's cache holds the e4m3 round trip; the kernels' FP8 caches are compared
// dequantised). Outputs are poisoned with NaN before each run. The tensor-core kernels' bit
// equalities: tests/cuda/test_attention.cpp. The references' fixed values:
// ops/rope_attention_ref.h.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "core/fp8.h"
#include "cuda/cuda_test_util.h"
#include "kernels/attention.cuh"
#include "kernels/rope.cuh"
#include "ops/rope_attention_ref.h"

using namespace loom;
using namespace loom::gpu;
using namespace loom::test;

static const DType kTypes[] = {DType::F32, DType::BF16};

namespace {

struct AttnCase {
  int heads, kv_heads, head_dim, splits;
  std::vector<std::pair<int, int>> seqs;  // (kv_len, n_new)
};

// The cache as floats: t's values, or (fp8) e4m3 bytes times the kv head's scale.
std::vector<float> download_cache(const DevBuf& b, size_t n, DType t, bool fp8,
                                  const std::vector<float>& scale, int KV, int D) {
  if (!fp8) return download(b, n, t);
  std::vector<uint8_t> q(n);
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  LOOM_CUDA_CHECK(cudaMemcpy(q.data(), b.get(), n, cudaMemcpyDeviceToHost));
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) v[i] = fp8_e4m3_to_f32(q[i]) * scale[i / size_t(D) % size_t(KV)];
  return v;
}

void run_attention_case(const AttnCase& c, DType t, bool fp8) {
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
  // FP8: scales per kv head (K then V); the old cache rows already as e4m3.
  std::vector<float> scales;
  for (int h = 0; h < 2 * KV; h++) scales.push_back(1.0f / (64.0f + 32.0f * h));
  const std::vector<float> k_scale(scales.begin(), scales.begin() + KV),
      v_scale(scales.begin() + KV, scales.end());
  std::vector<uint8_t> kq(pool), vq(pool);
  if (fp8)
    for (size_t i = 0; i < pool; i++) {
      const int h = int(i / size_t(D) % size_t(KV));
      kq[i] = fp8_e4m3_from_f32(kc[i] * (1.0f / k_scale[size_t(h)]));
      vq[i] = fp8_e4m3_from_f32(vc[i] * (1.0f / v_scale[size_t(h)]));
      kc[i] = fp8_e4m3_to_f32(kq[i]) * k_scale[size_t(h)];
      vc[i] = fp8_e4m3_to_f32(vq[i]) * v_scale[size_t(h)];
    }

  // The references, with the kernels' argument structs over host buffers.
  const std::vector<float> inv = rope_inv_freq(D, theta, true);
  std::vector<float> ref_qkv = qkv, ref_k = kc, ref_v = vc, ref_out(size_t(n_slots) * H * D);
  RopeKvArgs hr;
  hr.t = DType::F32;
  hr.kv_fp8 = fp8;
  hr.kv_scale = scales.data();
  hr.qkv = ref_qkv.data();
  hr.positions = positions.data();
  hr.cache_slot = cache_slot.data();
  hr.inv_freq = inv.data();
  hr.n_slots = n_slots, hr.heads = H, hr.kv_heads = KV, hr.head_dim = D;
  hr.k_cache = ref_k.data();
  hr.v_cache = ref_v.data();
  cpu::rope_kv_write(hr);
  AttentionArgs ha;
  ha.t = DType::F32;
  ha.qkv = ref_qkv.data();
  ha.k_cache = ref_k.data();
  ha.v_cache = ref_v.data();
  ha.block_tables = bt.data();
  ha.bt_stride = bt_stride;
  ha.kv_len = kv_len.data();
  ha.slot_start = slot_start.data();
  ha.tiles = tiles.data();
  ha.n_tiles = n_tiles, ha.heads = H, ha.kv_heads = KV, ha.head_dim = D, ha.block_size = bs;
  ha.out = ref_out.data();
  cpu::paged_attention(ha);

  auto upload_cache = [&](const std::vector<float>& v, const std::vector<uint8_t>& q) {
    return fp8 ? upload_ints(q) : upload(v, t);
  };
  DevBuf dqkv = upload(qkv, t), dk = upload_cache(kc, kq), dv = upload_cache(vc, vq),
         dsc = upload(scales, DType::F32), dinv = upload(inv, DType::F32),
         dpos = upload_ints(positions), dcs = upload_ints(cache_slot), dbt = upload_ints(bt),
         dkv = upload_ints(kv_len), dss = upload_ints(slot_start), dtiles = upload_ints(tiles);
  const size_t blocks = size_t(n_tiles) * KV * c.splits;
  DevBuf po(attention_partial_floats(blocks, D) * 4), pml(blocks * kAttnRows * 2 * 4);
  DevBuf out(size_t(n_slots) * H * D * 4);
  out.poison();
  po.poison();
  pml.poison();
  // The kernels' arguments: the references' with device buffers and the dtype t.
  RopeKvArgs r = hr;
  r.t = t;
  r.kv_scale = fp8 ? dsc.as<float>() : nullptr;
  r.qkv = dqkv.get();
  r.positions = dpos.as<int32_t>();
  r.cache_slot = dcs.as<int32_t>();
  r.inv_freq = dinv.as<float>();
  r.k_cache = dk.get();
  r.v_cache = dv.get();
  LOOM_KERNEL(rope_kv_write(r, nullptr));
  AttentionArgs a = ha;
  a.t = t;
  a.kv_fp8 = fp8;
  a.kv_scale = r.kv_scale;
  a.qkv = dqkv.get();
  a.k_cache = dk.get();
  a.v_cache = dv.get();
  a.block_tables = dbt.as<int32_t>();
  a.kv_len = dkv.as<int32_t>();
  a.slot_start = dss.as<int32_t>();
  a.tiles = dtiles.as<int32_t>();
  a.num_splits = c.splits;
  a.partial_o = po.as<float>();
  a.partial_ml = pml.as<float>();
  a.out = out.get();
  LOOM_KERNEL(paged_attention(a, nullptr));
  // An FP8 cache: a k the kernel rounded to t first may land one e4m3 step from the
  // reference's (relative 2^-4 for that element), hence the looser bound on the caches.
  const double cache_tol = fp8 ? 2e-2 : tolerance(t), out_tol = cache_tol;
  CHECK(rel_err(download_cache(dk, pool, t, fp8, k_scale, KV, D), ref_k) < cache_tol);
  CHECK(rel_err(download_cache(dv, pool, t, fp8, v_scale, KV, D), ref_v) < cache_tol);
  CHECK(rel_err(download(out, ref_out.size(), t), ref_out) < out_tol);
  // The decode kernel on the same (already written) cache, where every tile is one slot.
  if (n_tiles == n_slots && H / KV <= kDecodeMaxG) {
    out.poison();
    po.poison();
    pml.poison();
    a.decode = true;
    LOOM_KERNEL(paged_attention(a, nullptr));
    CHECK(rel_err(download(out, ref_out.size(), t), ref_out) < out_tol);
    // ... and with RoPE and the KV write fused in, from the unrotated qkv and the old cache.
    DevBuf qkv2 = upload(qkv, t), k2 = upload_cache(kc, kq), v2 = upload_cache(vc, vq);
    out.poison();
    a.qkv = qkv2.get();
    a.k_cache = k2.get();
    a.v_cache = v2.get();
    a.fuse_rope = true;
    a.positions = dpos.as<int32_t>();
    a.cache_slot = dcs.as<int32_t>();
    a.inv_freq = dinv.as<float>();
    LOOM_KERNEL(paged_attention(a, nullptr));
    CHECK(rel_err(download(out, ref_out.size(), t), ref_out) < out_tol);
    CHECK(rel_err(download_cache(k2, pool, t, fp8, k_scale, KV, D), ref_k) < cache_tol);
    CHECK(rel_err(download_cache(v2, pool, t, fp8, v_scale, KV, D), ref_v) < cache_tol);
  }
}

}  // namespace

TEST_CASE("rope_kv_write + paged_attention match their references (bf16 / f32 and FP8 caches)") {
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
  for (bool fp8 : {false, true})
    for (DType t : kTypes)
      for (const AttnCase& c : all) {
        CAPTURE(fp8);
        CAPTURE(dtype_name(t));
        CAPTURE(c.heads);
        CAPTURE(c.kv_heads);
        CAPTURE(c.head_dim);
        CAPTURE(c.splits);
        run_attention_case(c, t, fp8);
      }
}
