// The tensor-core paged attention (bf16, kernels/attention_mma.cu and attention_tma.cu), every
// decode kernel (decoders(): split, split + combine kernel, the TMA pipeline's builds with and
// without chunks) against the prefill kernel bitwise:
//  - accuracy: against cpu::paged_attention (fp32 on the same bf16 values), decode batches 1,
//    3, 19, short chunks as one-slot tiles beside decodes, and prefill chunks that start
//    mid-sequence, contexts crossing the 64-key tile, the 256-key partition and the 16-slot
//    block boundaries; head_dim 64 (G = 8, 2) and 16 (G = 3, the tiny models, and 16);
//  - batch invariance, bitwise: a query row computed alone in a decode step, among 19 sequences
//    of other lengths, by the prefill kernel, inside prefill chunks starting at other offsets,
//    and over a cache with another block size, gives the same bf16 bits;
//  - fused RoPE (decode kernel rotates q and the new k, writes k, v) gives rope_kv_write's
//    bits: output and cache;
//  - a batch of 130 with 1..11 partitions a row (several per block of the split decode
//    kernel): decode (in-kernel combine and combine kernel) and prefill bits, row by row;
//  - the prefill kernel's ring at every depth it is built for: the same bits.
// Cache and query values are functions of (sequence, position, head, dim), so that the same
// sequence can be laid out in different pools. On failure the first differing / worst element
// is printed (slot, head, dim, values).
#include <doctest/doctest.h>

#include "attention_world.h"
#include "kernels/rope.cuh"

TEST_CASE("tensor-core attention (bf16) matches cpu::paged_attention") {
  const std::vector<Shape> shapes = {{32, 4, 64}, {4, 2, 64}, {6, 2, 16}, {16, 1, 16}};
  const std::vector<int> contexts = {1, 63, 64, 65, 255, 256, 257, 600, 2100};
  for (const Shape& sh : shapes)
    for (int bs : {16, 32, 64, 128}) {  // 64: one TMA box a 64-key tile
      CAPTURE(sh.heads);
      CAPTURE(sh.kv_heads);
      CAPTURE(sh.head_dim);
      CAPTURE(bs);
      // Sequences 0..8: the contexts; 9..27: batch 19; 28..30: prefill sequences.
      std::vector<int> lens = contexts;
      for (int i = 0; i < 19; i++) lens.push_back((i * 113) % 2100 + 1);
      lens.insert(lens.end(), {263, 300, 570});
      const World w(sh.heads, sh.kv_heads, sh.head_dim, bs, lens, 5);
      std::vector<std::pair<std::string, std::vector<Entry>>> steps;
      for (size_t i = 0; i < contexts.size(); i++)
        steps.push_back({"decode batch 1, context " + std::to_string(contexts[i]),
                         {{int(i), contexts[i] - 1, 1}}});
      steps.push_back({"decode batch 3", {{7, 599, 1}, {0, 0, 1}, {2, 63, 1}}});
      std::vector<Entry> b19;
      for (int i = 0; i < 19; i++) b19.push_back({9 + i, lens[size_t(9 + i)] - 1, 1});
      steps.push_back({"decode batch 19", b19});
      steps.push_back({"prefill from 250 (13 slots)", {{28, 250, 13}}});
      steps.push_back({"action chunks beside decodes",
                       {{30, 500, 7}, {7, 599, 1}, {28, 60, 7}, {8, 2000, 16}, {0, 0, 1}}});
      steps.push_back({"prefill from 0 (300 slots)", {{29, 0, 300}}});
      steps.push_back({"mixed prefill", {{30, 500, 70}, {7, 599, 1}, {28, 0, 9}, {8, 2000, 100}}});
      for (const auto& [name, es] : steps) {
        CAPTURE(name);
        const std::vector<float> want = reference(w, es);
        const std::vector<uint16_t> pre = run_step(w, es, false);
        check_close(to_floats(pre), want, sh.heads, sh.head_dim,
                    (name + ", prefill kernel").c_str());
        // Decode kernels: every step whose chunks are short (one-slot tiles of a chunk).
        bool short_chunks = true;
        for (const Entry& e : es) short_chunks = short_chunks && e.n_new <= 16;
        if (short_chunks)
          for (const Decoder& d : decoders(w)) {
            CAPTURE(d.name);
            CAPTURE(d.tma_config);
            const std::vector<uint16_t> dec = run_decode(w, es, d);
            check_close(to_floats(dec), want, sh.heads, sh.head_dim,
                        (name + ", " + d.name).c_str());
            bool same = true;
            for (int s = 0; s < count_slots(es) && same; s++)
              same = same_row(dec, s, pre, s, sh.heads, sh.head_dim,
                              (std::string(d.name) + " vs prefill kernel").c_str(),
                              es[size_t(s)].kv_len);
            CHECK(same);
          }
      }
    }
}

TEST_CASE("tensor-core attention (bf16) is batch invariant, bitwise") {
  for (const Shape& sh : std::vector<Shape>{{32, 4, 64}, {6, 2, 16}, {4, 2, 64}}) {
    CAPTURE(sh.heads);
    CAPTURE(sh.kv_heads);
    CAPTURE(sh.head_dim);
    const int H = sh.heads, D = sh.head_dim;
    // Sequence 0 is the one watched; 1..18 are the company, of other lengths.
    std::vector<int> lens = {2120};
    for (int i = 1; i < 19; i++) lens.push_back((i * 149) % 2100 + 30);
    const World w16(H, sh.kv_heads, D, 16, lens, 11);
    const World w32(H, sh.kv_heads, D, 32, lens, 12);
    for (int p : {0, 5, 63, 64, 200, 255, 256, 257, 600, 1000, 2099}) {
      CAPTURE(p);
      const std::vector<uint16_t> alone = run_step(w16, {{0, p, 1}}, true);
      std::vector<Entry> company;
      int x_slot = -1;
      for (int i = 1; i < 19; i++) {
        if (i == 7) {
          x_slot = int(company.size());
          company.push_back({0, p, 1});
        }
        company.push_back({i, lens[size_t(i)] - 1 - (i % 5), 1});
      }
      const std::vector<uint16_t> among = run_step(w16, company, true);
      const std::vector<uint16_t> among_pre = run_step(w16, company, false);
      const std::vector<uint16_t> among_combine = run_step(w16, company, true, false);
      for (const Decoder& d : decoders(w16)) {
        if (d.kernel != DK::Tma) continue;
        CAPTURE(d.tma_config);
        const std::vector<uint16_t> x = run_decode(w16, company, d);
        const std::vector<uint16_t> y = run_decode(w32, {{0, p, 1}}, d);
        CHECK(same_row(alone, 0, x, x_slot, H, D, (std::string(d.name) + " among 19").c_str(), p));
        CHECK(same_row(alone, 0, y, 0, H, D, (std::string(d.name) + ", block size 32").c_str(), p));
      }
      const std::vector<uint16_t> alone_pre = run_step(w16, {{0, p, 1}}, false);
      const int c0 = std::max(0, p - 5), c1 = std::max(0, p - 13);
      const std::vector<uint16_t> chunk = run_step(w16, {{0, c0, p - c0 + 3}}, false);
      const std::vector<uint16_t> chunk2 =
          run_step(w16, {{3, 10, 5}, {0, c1, p - c1 + 7}, {5, 0, 1}}, false);
      const std::vector<uint16_t> other_bs = run_step(w32, {{0, p, 1}}, true);
      // The watched row's slot in each step.
      CHECK(same_row(alone, 0, among, x_slot, H, D, "alone vs among 19 (decode kernel)", p));
      CHECK(same_row(alone, 0, among_pre, x_slot, H, D, "alone vs among 19 (prefill kernel)", p));
      CHECK(same_row(alone, 0, among_combine, x_slot, H, D,
                     "alone vs among 19 (decode + combine kernel)", p));
      CHECK(same_row(alone, 0, alone_pre, 0, H, D, "decode kernel vs prefill kernel", p));
      CHECK(same_row(alone, 0, chunk, p - c0, H, D, "decode vs prefill chunk from p - 5", p));
      CHECK(same_row(alone, 0, chunk2, 5 + p - c1, H, D, "decode vs chunk from p - 13", p));
      CHECK(same_row(alone, 0, other_bs, 0, H, D, "block size 16 vs 32", p));
      // And the value is right.
      check_close(to_floats(std::vector<uint16_t>(alone.begin(), alone.begin() + H * D)),
                  reference(w16, {{0, p, 1}}), H, D, "watched row vs cpu");
    }
  }
}

// Every decoder d with use(d) on the decode step es: each row bitwise the prefill kernel's, and
// close to the cpu's.
template <class Use>
void check_decoders_match_prefill(const World& w, const std::vector<Entry>& es, const char* what,
                                  Use use) {
  const std::vector<uint16_t> pre = run_step(w, es, false);
  const std::vector<float> want = reference(w, es);
  for (const Decoder& d : decoders(w)) {
    if (!use(d)) continue;
    CAPTURE(d.name);
    CAPTURE(d.tma_config);
    const std::vector<uint16_t> dec = run_decode(w, es, d);
    bool same = true;
    for (int s = 0; s < int(es.size()) && same; s++) {
      const int pos = es[size_t(s)].kv_len;
      same = same_row(dec, s, pre, s, w.H, w.D, (std::string(what) + ": vs prefill kernel").c_str(),
                      pos);
      if (!same) std::printf("  (%s, sequence %d of the batch, context %d)\n", d.name, s, pos + 1);
    }
    CHECK(same);
    check_close(to_floats(dec), want, w.H, w.D, (std::string(what) + ", " + d.name).c_str());
  }
}

TEST_CASE("TMA decode kernel at batch 8 over ~5,000 keys: the 3-warp blocks' bits") {
  // 32 (sequence, kv head) pairs of 20-21 partitions: more than a wave of the 2-stage 4-warp
  // blocks' warps on an H100 / H200, so config 0 takes blocks of 3 warps (launch_tma_config);
  // config 5 always does. Both give the split kernel's bits, row by row.
  std::vector<int> lens;
  std::vector<Entry> es;
  for (int i = 0; i < 8; i++) {
    lens.push_back(4900 + 37 * i);
    es.push_back({i, lens.back() - 1, 1});
  }
  const World w(32, 4, 64, 16, lens, 23);
  const std::vector<uint16_t> split = run_step(w, es, true);
  for (int cfg : {0, 5}) {
    CAPTURE(cfg);
    const std::vector<uint16_t> tma = run_step(w, es, true, true, DK::Tma, cfg);
    bool same = true;
    for (int s = 0; s < 8 && same; s++)
      same = same_row(tma, s, split, s, 32, 64, "TMA decode vs split", lens[size_t(s)] - 1);
    CHECK(same);
  }
}

TEST_CASE("split decode kernel at batch 130: many partitions per block, the prefill bits") {
  // Terra's heads; 130 sequences of contexts 1..2600 (1..11 partitions, last tiles partial):
  // 520 (tile, kv head) pairs, Z = 3 blocks each on 132 SMs, so a block folds up to 4
  // partitions in turn. Every row: bitwise the prefill kernel's, with the in-kernel combine
  // and with the combine kernel; close to the cpu's; counters back at zero (run_step checks).
  const int H = 32, KV = 4, D = 64, n = 130;
  std::vector<int> lens;
  for (int i = 0; i < n; i++) lens.push_back((i * 977) % 2600 + 1);
  const World w(H, KV, D, 16, lens, 17);
  std::vector<Entry> es;
  for (int i = 0; i < n; i++) es.push_back({i, lens[size_t(i)] - 1, 1});
  check_decoders_match_prefill(w, es, "batch 130", [](const Decoder&) { return true; });
}

namespace {

DevBuf copy_of(const DevBuf& src, size_t bytes) {
  DevBuf d(bytes);
  LOOM_CUDA_CHECK(cudaMemcpy(d.get(), src.get(), bytes, cudaMemcpyDeviceToDevice));
  return d;
}

// A decode step of `es` (one new slot each, its k and v not in the cache yet: q, k, v in qkv
// unrotated, values kinds 0, 3, 4): fused = the decode kernel with RoPE and the K/V write
// inside; otherwise rope_kv_write, then the tensor-core prefill kernel. k, v: the caches
// (written). Returns the output bits.
std::vector<uint16_t> run_rope_step(const World& w, const std::vector<Entry>& es, bool fused,
                                    DevBuf& k, DevBuf& v, const DevBuf& inv, DK kernel = DK::Split,
                                    int tma_config = 0, int stagger = 0) {
  const int H = w.H, KV = w.KV, D = w.D, row = (H + 2 * KV) * D;
  const int n = int(es.size());
  std::vector<int32_t> slot_start, kv_len, tiles, bt, positions, cache_slot;
  std::vector<float> qkv(size_t(n) * row);
  for (int s = 0; s < n; s++) {
    const Entry& e = es[size_t(s)];
    REQUIRE(e.n_new == 1);
    const int pos = e.kv_len;
    for (int h = 0; h < H + 2 * KV; h++)
      for (int d = 0; d < D; d++)
        qkv[size_t(s) * row + size_t(h) * D + d] =
            h < H        ? qval(e.seq, pos, h, d)
            : h < H + KV ? hval(3, e.seq, pos, h - H, d, -1.0f, 1.0f)
                         : hval(4, e.seq, pos, h - H - KV, d, -1.0f, 1.0f);
    slot_start.push_back(s);
    kv_len.push_back(e.kv_len);
    tiles.insert(tiles.end(), {s, 0, 1});
    positions.push_back(pos);
    const int32_t* t = w.tables.data() + size_t(e.seq) * w.bt_stride;
    cache_slot.push_back(t[pos / w.bs] * w.bs + pos % w.bs);
    bt.insert(bt.end(), t, t + w.bt_stride);
  }
  slot_start.push_back(n);
  DevBuf dpos = upload_ints(positions), dcs = upload_ints(cache_slot);
  Step st(w, qkv, slot_start, kv_len, tiles, bt, k.get(), v.get());
  AttentionArgs& a = st.a;
  DevBuf cnt = zero_counters(size_t(n) * KV);
  a.mma_counters = cnt.as<int>();
  a.mma_counters_len = size_t(n) * KV;
  a.decode_kernel = kernel;
  a.tma_config = tma_config;
  a.tma_shared_kv = a.tma_group = stagger > 0;  // as the backend runs steps sharing blocks
  a.tma_stagger = std::max(stagger, 1);
  if (fused) {
    a.decode = a.fuse_rope = true;
    a.positions = dpos.as<int32_t>();
    a.cache_slot = dcs.as<int32_t>();
    a.inv_freq = inv.as<float>();
  } else {
    RopeKvArgs r;
    r.t = DType::BF16;
    r.qkv = st.dq.get();
    r.positions = dpos.as<int32_t>();
    r.cache_slot = dcs.as<int32_t>();
    r.inv_freq = inv.as<float>();
    r.n_slots = n;
    r.heads = H;
    r.kv_heads = KV;
    r.head_dim = D;
    r.k_cache = k.get();
    r.v_cache = v.get();
    r.kv_fp8 = w.fp8;
    r.kv_scale = a.kv_scale;
    LOOM_KERNEL(rope_kv_write(r, nullptr));
  }
  LOOM_KERNEL(paged_attention(a, nullptr));
  return download_bits(st.out, size_t(n) * H * D);
}

}  // namespace

TEST_CASE("split decode kernel's staged fold over rounds: 8,200 keys, the prefill bits") {
  // The decode kernel's last block copies the partials to shared memory as many partitions at a
  // time as its tiles' space holds (Terra's shape: 31 with bf16 tiles, 15 with FP8): 8,200 keys
  // are 33 partitions, two rounds (FP8: three), 4,000 keys 16 (one; FP8 two). Every row:
  // bitwise the prefill kernel's, with the in-kernel fold and with the combine kernel.
  const int H = 32, KV = 4, D = 64;
  const std::vector<int> lens = {8200, 4000, 7937};
  for (float fp8_scale : {0.0f, 1.0f / 64}) {
    CAPTURE(fp8_scale);
    const World w(H, KV, D, 16, lens, 5, fp8_scale);
    std::vector<Entry> es;
    for (int i = 0; i < int(lens.size()); i++) es.push_back({i, lens[size_t(i)] - 1, 1});
    check_decoders_match_prefill(w, es, "staged fold",
                                 [](const Decoder& d) { return d.kernel == DK::Split; });
  }
}

TEST_CASE("fused RoPE in the tensor-core decode gives rope_kv_write's bits (bf16 and FP8 KV)") {
  const float theta = 10000.0f;
  for (float fp8_scale : {0.0f, 1.0f / 64})
    for (const Shape& sh : std::vector<Shape>{{32, 4, 64}, {6, 2, 16}}) {
      CAPTURE(fp8_scale);
      CAPTURE(sh.heads);
      CAPTURE(sh.head_dim);
      const int H = sh.heads, KV = sh.kv_heads, D = sh.head_dim;
      std::vector<int> lens = {700};
      for (int i = 1; i < 19; i++) lens.push_back((i * 149) % 2100 + 30);
      const World w(H, KV, D, 16, lens, 13, fp8_scale);
      const size_t cache_n = w.kc.size(), cache_bytes = cache_n * w.elem();
      std::vector<float> inv(size_t(D / 2));
      for (int j = 0; j < D / 2; j++)
        inv[size_t(j)] = 1.0f / std::pow(theta, float(2 * j) / float(D));
      const DevBuf dinv = upload(inv, DType::F32);
      for (int p : {0, 63, 64, 255, 256, 600, 699}) {
        CAPTURE(p);
        DevBuf ka = copy_of(w.dk, cache_bytes), va = copy_of(w.dv, cache_bytes);
        DevBuf kb = copy_of(w.dk, cache_bytes), vb = copy_of(w.dv, cache_bytes);
        DevBuf kc = copy_of(w.dk, cache_bytes), vc = copy_of(w.dv, cache_bytes);
        const std::vector<uint16_t> fused = run_rope_step(w, {{0, p, 1}}, true, ka, va, dinv);
        const std::vector<uint16_t> unfused = run_rope_step(w, {{0, p, 1}}, false, kb, vb, dinv);
        std::vector<Entry> company;
        int x_slot = -1;
        for (int i = 1; i < 19; i++) {
          if (i == 5) {
            x_slot = int(company.size());
            company.push_back({0, p, 1});
          }
          company.push_back({i, lens[size_t(i)] - 1, 1});
        }
        const std::vector<uint16_t> among = run_rope_step(w, company, true, kc, vc, dinv);
        CHECK(same_row(fused, 0, unfused, 0, H, D, "fused RoPE vs rope_kv_write", p));
        CHECK(same_row(fused, 0, among, x_slot, H, D, "fused RoPE alone vs among 19", p));
        // The TMA kernel: RoPE and the new key's row inside every build (0: 4 warps, 5: 3
        // warps, 3: unswapped tiles, 4: one stage, K and V on their own barriers; over an FP8
        // cache config 4 runs config 0's build).
        for (int cfg : {0, 3, 4, 5}) {
          if (D != 64) break;  // (the TMA kernel: head_dim 64 only)
          CAPTURE(cfg);
          DevBuf kd = copy_of(w.dk, cache_bytes), vd = copy_of(w.dv, cache_bytes);
          const std::vector<uint16_t> tma =
              run_rope_step(w, company, true, kd, vd, dinv, DK::Tma, cfg);
          CHECK(same_row(fused, 0, tma, x_slot, H, D, "fused RoPE vs TMA decode among 19", p));
          CHECK_MESSAGE(download_bits(kd, cache_bytes / 2) == download_bits(kc, cache_bytes / 2),
                        "K cache after the TMA decode step differs from the fused write's");
          CHECK_MESSAGE(download_bits(vd, cache_bytes / 2) == download_bits(vc, cache_bytes / 2),
                        "V cache after the TMA decode step differs from the fused write's");
        }
        const std::vector<uint16_t> cka = download_bits(ka, cache_bytes / 2),
                                    ckb = download_bits(kb, cache_bytes / 2);
        const std::vector<uint16_t> cva = download_bits(va, cache_bytes / 2),
                                    cvb = download_bits(vb, cache_bytes / 2);
        CHECK_MESSAGE(cka == ckb, "K cache after the fused write differs from rope_kv_write's");
        CHECK_MESSAGE(cva == cvb, "V cache after the fused write differs from rope_kv_write's");
        // Value check: the references rope_kv_write and paged_attention on one slot (qkv
        // unrotated; an FP8 cache's values: bf16, then the e4m3 round trip).
        std::vector<float> qkv(size_t(H + 2 * KV) * D);
        for (int h = 0; h < H + 2 * KV; h++)
          for (int d = 0; d < D; d++)
            qkv[size_t(h) * D + d] = h < H        ? qval(0, p, h, d)
                                     : h < H + KV ? hval(3, 0, p, h - H, d, -1.0f, 1.0f)
                                                  : hval(4, 0, p, h - H - KV, d, -1.0f, 1.0f);
        std::vector<float> rk = w.kc, rv = w.vc, want(size_t(H) * D);
        const int32_t pos = p, cs = w.tables[size_t(p / w.bs)] * w.bs + p % w.bs;
        const int32_t tile[3] = {0, 0, 1}, starts[2] = {0, 1};
        RopeKvArgs r;
        r.t = DType::F32;
        r.kv_fp8 = w.fp8;
        r.kv_scale = w.fp8 ? w.scales.data() : nullptr;
        r.qkv = qkv.data();
        r.positions = &pos;
        r.cache_slot = &cs;
        r.inv_freq = inv.data();
        r.n_slots = 1, r.heads = H, r.kv_heads = KV, r.head_dim = D;
        r.k_cache = rk.data();
        r.v_cache = rv.data();
        cpu::rope_kv_write(r);
        AttentionArgs a;
        a.t = DType::F32;
        a.qkv = qkv.data();
        a.k_cache = rk.data();
        a.v_cache = rv.data();
        a.block_tables = w.tables.data();
        a.bt_stride = w.bt_stride;
        a.kv_len = &pos;
        a.slot_start = starts;
        a.tiles = tile;
        a.n_tiles = 1, a.heads = H, a.kv_heads = KV, a.head_dim = D, a.block_size = w.bs;
        a.out = want.data();
        cpu::paged_attention(a);
        check_close(to_floats(fused), want, H, D, "fused RoPE decode vs cpu");
      }
    }
}

TEST_CASE("fused RoPE in the TMA decode of 256 sequences sharing blocks: rope_kv_write's bits") {
  // bf16, 1,024 pairs past one wave of 2-stage blocks, sets of 8 sharing their lead's first
  // blocks, launched as the backend launches such steps (tma_shared_kv, tma_group, 2 stagger
  // classes): one stage a warp (K's new row written once K lands, V's once V does), group
  // blocks, staggered pairs taking their last partitions, the new key's among them, first.
  // (test_attention_shared.cpp counts the group tiles of such launches.) The new keys (from
  // 1,800) lie past every shared block. Output and caches bitwise those of rope_kv_write,
  // then the prefill kernel.
  const int H = 32, KV = 4, D = 64, n = 256;
  std::vector<int> lens;
  for (int i = 0; i < n; i++) lens.push_back(1801 + (i * 37) % 300);
  World w(H, KV, D, 16, lens, 31, 0.0f);
  share_prefix(w, n);
  std::vector<float> inv(size_t(D / 2));
  for (int j = 0; j < D / 2; j++) inv[size_t(j)] = 1.0f / std::pow(10000.0f, float(2 * j) / D);
  const DevBuf dinv = upload(inv, DType::F32);
  std::vector<Entry> es;
  for (int i = 0; i < n; i++) es.push_back({i, lens[size_t(i)] - 1, 1});
  const size_t cache_bytes = w.kc.size() * w.elem();
  DevBuf ka = copy_of(w.dk, cache_bytes), va = copy_of(w.dv, cache_bytes);
  DevBuf kb = copy_of(w.dk, cache_bytes), vb = copy_of(w.dv, cache_bytes);
  const std::vector<uint16_t> fused = run_rope_step(w, es, true, ka, va, dinv, DK::Tma, 0, 2);
  const std::vector<uint16_t> unfused = run_rope_step(w, es, false, kb, vb, dinv, DK::Tma, 0, 2);
  bool same = true;
  for (int s = 0; s < n && same; s++)
    same = same_row(fused, s, unfused, s, H, D, "shared: fused RoPE vs rope_kv_write",
                    lens[size_t(s)] - 1);
  CHECK(same);
  CHECK_MESSAGE(download_bits(ka, cache_bytes / 2) == download_bits(kb, cache_bytes / 2),
                "K cache after the fused shared step differs from rope_kv_write's");
  CHECK_MESSAGE(download_bits(va, cache_bytes / 2) == download_bits(vb, cache_bytes / 2),
                "V cache after the fused shared step differs from rope_kv_write's");
}

TEST_CASE("tensor-core attention over an FP8 KV cache: the cpu's values, decode = prefill bits") {
  // Scales: 1/448 puts |x| = 1 at the top code (448), 1/64 mid-range, 1 leaves values < 1 in
  // the low binades and subnormals. The reference reads the dequantised cache in fp32.
  const std::vector<int> contexts = {1, 64, 65, 256, 257, 600, 2100};
  for (float scale : {1.0f / 448, 1.0f / 64, 1.0f})
    for (const Shape& sh : std::vector<Shape>{{32, 4, 64}, {6, 2, 16}}) {
      CAPTURE(scale);
      CAPTURE(sh.heads);
      CAPTURE(sh.head_dim);
      std::vector<int> lens = contexts;
      for (int i = 0; i < 19; i++) lens.push_back((i * 113) % 2100 + 1);
      lens.push_back(570);
      // The 1/64 world in blocks of 64 slots (one TMA box a 64-key tile), the others of 16.
      const int bs = scale == 1.0f / 64 ? 64 : 16;
      CAPTURE(bs);
      const World w(sh.heads, sh.kv_heads, sh.head_dim, bs, lens, 7, scale);
      std::vector<std::pair<std::string, std::vector<Entry>>> steps;
      for (size_t i = 0; i < contexts.size(); i++)
        steps.push_back({"decode batch 1, context " + std::to_string(contexts[i]),
                         {{int(i), contexts[i] - 1, 1}}});
      std::vector<Entry> b19;
      for (int i = 0; i < 19; i++) b19.push_back({7 + i, lens[size_t(7 + i)] - 1, 1});
      steps.push_back({"decode batch 19", b19});
      steps.push_back({"prefill from 500 (70 slots) with a decode", {{26, 500, 70}, {5, 599, 1}}});
      for (const auto& [name, es] : steps) {
        CAPTURE(name);
        const std::vector<float> want = reference(w, es);
        const std::vector<uint16_t> pre = run_step(w, es, false);
        check_close(to_floats(pre), want, sh.heads, sh.head_dim, (name + ", prefill").c_str());
        if (count_slots(es) != int(es.size())) continue;
        for (const Decoder& d : decoders(w)) {
          CAPTURE(d.name);
          CAPTURE(d.tma_config);
          const std::vector<uint16_t> dec = run_decode(w, es, d);
          bool same = true;
          for (int s = 0; s < count_slots(es) && same; s++)
            same = same_row(dec, s, pre, s, sh.heads, sh.head_dim,
                            (std::string("fp8: ") + d.name + " vs prefill").c_str(),
                            es[size_t(s)].kv_len);
          CHECK(same);
        }
      }
      // Batch invariance: sequence 5's row alone, among 19, and inside a prefill chunk.
      const int p = 599;
      const std::vector<uint16_t> alone = run_step(w, {{5, p, 1}}, true);
      std::vector<Entry> company = b19;
      company.insert(company.begin() + 7, Entry{5, p, 1});
      const std::vector<uint16_t> among = run_step(w, company, true);
      const std::vector<uint16_t> chunk = run_step(w, {{5, p - 9, 10}}, false);
      CHECK(same_row(alone, 0, among, 7, sh.heads, sh.head_dim, "fp8: alone vs among 19", p));
      for (const Decoder& d : decoders(w))
        CHECK(same_row(alone, 0, run_decode(w, company, d), 7, sh.heads, sh.head_dim,
                       (std::string("fp8: alone vs among 19, ") + d.name).c_str(), p));
      CHECK(same_row(alone, 0, chunk, 9, sh.heads, sh.head_dim, "fp8: decode vs chunk", p));
    }
}

TEST_CASE("prefill kernel's builds (ring of 2-4 stages, 3 blocks an SM): the same bits") {
  // Chunks of every length against 1 to 2,100 keys (one tile, a partial partition, many
  // partitions) beside one-slot decode rows; a build only changes when each tile's copies land
  // and which registers hold what.
  for (float scale : {0.0f, 1.0f / 64})
    for (const Shape& sh : std::vector<Shape>{{32, 4, 64}, {6, 2, 16}}) {
      CAPTURE(scale);
      CAPTURE(sh.head_dim);
      const std::vector<int> lens = {2100, 70, 640, 1, 300};
      const World w(sh.heads, sh.kv_heads, sh.head_dim, 16, lens, 5, scale);
      const std::vector<Entry> es = {
          {0, 1500, 600}, {1, 0, 70}, {2, 639, 1}, {3, 0, 1}, {4, 250, 50}};
      const std::vector<uint16_t> base = run_step(w, es, false);
      check_close(to_floats(base), reference(w, es), sh.heads, sh.head_dim, "prefill");
      for (int blocks : {0, 3})
        for (int stages : {2, 3, 4}) {
          CAPTURE(blocks);
          CAPTURE(stages);
          CHECK(run_step(w, es, false, true, DK::Split, 0, true, 0, nullptr, nullptr, stages,
                         blocks) == base);
        }
    }
  // A build that does not exist is refused, not replaced by another.
  const World w(32, 4, 64, 16, {300}, 5);
  CHECK_THROWS_WITH(
      run_step(w, {{0, 0, 300}}, false, true, DK::Split, 0, true, 0, nullptr, nullptr, 5),
      doctest::Contains("prefill_stages 5: expected 2, 3 or 4"));
  CHECK_THROWS_WITH(
      run_step(w, {{0, 0, 300}}, false, true, DK::Split, 0, true, 0, nullptr, nullptr, 2, 2),
      doctest::Contains("prefill_blocks_per_sm 2: expected 0 or 3"));
}
