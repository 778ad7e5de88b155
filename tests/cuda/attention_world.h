// The tensor-core attention tests' world (test_attention.cpp, test_attention_shared.cpp):
// sequences' K/V in a paged pool with values that are functions of (sequence, position, head,
// dim), decode steps over them through any decode kernel (run_step), the cpu reference and the
// row comparisons that print the first difference.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/fp8.h"
#include "cuda_test_util.h"
#include "kernels/attention.cuh"
#include "kernels/attention.h"

using namespace loom;
using namespace loom::gpu;
using namespace loom::test;

namespace {

// Deterministic value in [lo, hi), rounded to bf16, for a tuple of small integers.
float hval(uint64_t kind, uint64_t seq, uint64_t pos, uint64_t head, uint64_t d, float lo,
           float hi) {
  uint64_t x = 0x9E3779B97F4A7C15ull * (kind + 1);
  for (uint64_t c : {seq, pos, head, d}) {
    x ^= c + 0x632BE59BD9B4E019ull + (x << 6) + (x >> 2);
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
  }
  const float u = float(x >> 40) / float(1 << 24);
  return bf16_to_f32(f32_to_bf16(lo + (hi - lo) * u));
}
float qval(int seq, int pos, int head, int d) {
  return hval(0, seq, pos, head, d, -2.0f, 2.0f);
}
float kval(int seq, int pos, int head, int d) {
  return hval(1, seq, pos, head, d, -1.0f, 1.0f);
}
float vval(int seq, int pos, int head, int d) {
  return hval(2, seq, pos, head, d, -1.0f, 1.0f);
}

// Sequences' K/V in a paged pool (shuffled block order; block 0 unused so no table is the
// identity), lens[s] positions each. fp8_scale > 0: an FP8 cache, kv head h scaled by
// fp8_scale · (1 + h / 4) for K and fp8_scale · (1 + h / 3) for V; kc, vc hold what it
// dequantises to (the reference's input).
struct World {
  int H, KV, D, bs;
  std::vector<int> lens;
  int bt_stride = 1;
  std::vector<int32_t> tables;  // [n_seqs, bt_stride], -1 past a sequence's blocks
  std::vector<float> kc, vc;    // [pool_blocks * bs, KV, D]
  DevBuf dk, dv;
  bool fp8 = false;
  std::vector<float> scales;  // [2, KV] K then V (fp8)
  DevBuf dscale;

  size_t elem() const { return fp8 ? 1 : 2; }  // bytes per cache element
  float k_scale(int h) const { return scales[size_t(h)]; }
  float v_scale(int h) const { return scales[size_t(KV + h)]; }

  World(int heads, int kv_heads, int head_dim, int block_size, std::vector<int> seq_lens,
        unsigned perm_seed, float fp8_scale = 0)
      : H(heads),
        KV(kv_heads),
        D(head_dim),
        bs(block_size),
        lens(std::move(seq_lens)),
        fp8(fp8_scale > 0) {
    if (fp8) {
      for (int h = 0; h < KV; h++) scales.push_back(fp8_scale * (1.0f + h / 4.0f));
      for (int h = 0; h < KV; h++) scales.push_back(fp8_scale * (1.0f + h / 3.0f));
      dscale = upload(scales, DType::F32);
    }
    int total = 1;
    for (int l : lens) {
      total += (l + bs - 1) / bs;
      bt_stride = std::max(bt_stride, (l + bs - 1) / bs);
    }
    std::vector<int32_t> perm(size_t(total - 1));
    std::iota(perm.begin(), perm.end(), 1);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(perm_seed));
    tables.assign(lens.size() * size_t(bt_stride), -1);
    kc.assign(size_t(total) * bs * KV * D, 0.0f);
    vc = kc;
    size_t next = 0;
    for (size_t s = 0; s < lens.size(); s++) {
      for (int b = 0; b < (lens[s] + bs - 1) / bs; b++)
        tables[s * bt_stride + size_t(b)] = perm[next++];
      for (int pos = 0; pos < lens[s]; pos++) {
        const size_t row = size_t(tables[s * bt_stride + size_t(pos / bs)]) * bs + pos % bs;
        for (int h = 0; h < KV; h++)
          for (int d = 0; d < D; d++) {
            kc[(row * KV + h) * D + d] = kval(int(s), pos, h, d);
            vc[(row * KV + h) * D + d] = vval(int(s), pos, h, d);
          }
      }
    }
    if (!fp8) {
      dk = upload(kc, DType::BF16);
      dv = upload(vc, DType::BF16);
      return;
    }
    std::vector<uint8_t> qk(kc.size()), qv(vc.size());
    for (size_t i = 0; i < kc.size(); i++) {
      const int h = int(i / D % KV);
      qk[i] = fp8_e4m3_from_f32(kc[i] * (1.0f / k_scale(h)));
      qv[i] = fp8_e4m3_from_f32(vc[i] * (1.0f / v_scale(h)));
      kc[i] = fp8_e4m3_to_f32(qk[i]) * k_scale(h);
      vc[i] = fp8_e4m3_to_f32(qv[i]) * v_scale(h);
    }
    dk = upload_ints(qk);
    dv = upload_ints(qv);
  }
};

struct Entry {
  int seq, kv_len, n_new;  // new slots at positions kv_len .. kv_len + n_new - 1
};

int count_slots(const std::vector<Entry>& es) {
  int n = 0;
  for (const Entry& e : es) n += e.n_new;
  return n;
}

// Zeroed counters for the decode kernel's in-kernel combine.
DevBuf zero_counters(size_t n) {
  DevBuf c(n * 4);
  LOOM_CUDA_CHECK(cudaMemset(c.get(), 0, n * 4));
  return c;
}

// The counters must be back at zero after a call (a graph replays with the same ones).
void check_counters_zero(const DevBuf& c, size_t n) {
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<int32_t> v(n);
  LOOM_CUDA_CHECK(cudaMemcpy(v.data(), c.get(), n * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++)
    if (v[i] != 0) {
      std::printf("decode counter %zu (tile %zu) is %d after the call, expected 0\n", i, i, v[i]);
      CHECK(v[i] == 0);
      return;
    }
}

std::vector<uint16_t> download_bits(const DevBuf& b, size_t n) {
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> v(n);
  LOOM_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n * 2, cudaMemcpyDeviceToHost));
  return v;
}

// A step's device inputs, its (poisoned) tensor-core partials and output, and the
// AttentionArgs over them: bf16, the caches k and v, everything but the mode fields.
struct Step {
  DevBuf dq, dss, dkv, dt, dbt, part, out;
  AttentionArgs a;
  Step(const World& w, const std::vector<float>& qkv, const std::vector<int32_t>& slot_start,
       const std::vector<int32_t>& kv_len, const std::vector<int32_t>& tiles,
       const std::vector<int32_t>& bt, const void* k, const void* v)
      : dq(upload(qkv, DType::BF16)),
        dss(upload_ints(slot_start)),
        dkv(upload_ints(kv_len)),
        dt(upload_ints(tiles)),
        dbt(upload_ints(bt)) {
    const int n_tiles = int(tiles.size() / 3), n_slots = slot_start.back();
    const size_t part_floats =
        attention_mma_partial_floats(n_tiles, w.KV, w.H, w.D, w.bt_stride, w.bs);
    part = DevBuf(part_floats * 4);
    out = DevBuf(size_t(n_slots) * w.H * w.D * 2);
    part.poison();
    out.poison();
    a.t = DType::BF16;
    a.qkv = dq.get();
    a.k_cache = k;
    a.v_cache = v;
    a.block_tables = dbt.as<int32_t>();
    a.bt_stride = w.bt_stride;
    a.kv_len = dkv.as<int32_t>();
    a.slot_start = dss.as<int32_t>();
    a.tiles = dt.as<int32_t>();
    a.n_tiles = n_tiles;
    a.heads = w.H;
    a.kv_heads = w.KV;
    a.head_dim = w.D;
    a.block_size = w.bs;
    a.out = out.get();
    a.mma_partial = part.as<float>();
    a.mma_partial_floats = part_floats;
    a.kv_fp8 = w.fp8;
    a.kv_scale = w.fp8 ? w.dscale.as<float>() : nullptr;
    a.cache_slots = int(w.kc.size() / (size_t(w.KV) * w.D));
  }
};

// A decode kernel to run: the split kernel (counters: combining in its last block, else the
// combine kernel) or a build of the TMA pipeline (counters: chunks of partitions folded by the
// last; without them one chunk a sequence, no partials).
struct Decoder {
  const char* name;
  AttentionArgs::DecodeKernel kernel;
  bool counters;
  int tma_config;
};
using DK = AttentionArgs::DecodeKernel;

// Every decode kernel for the world's shape (the TMA pipeline takes head_dim 64).
std::vector<Decoder> decoders(const World& w) {
  std::vector<Decoder> d = {{"split decode kernel", DK::Split, true, 0},
                            {"split decode + combine kernel", DK::Split, false, 0}};
  if (w.D != 64) return d;
  for (int c = 0; c < kTmaDecodeConfigs; c++) d.push_back({"TMA decode kernel", DK::Tma, true, c});
  d.push_back({"TMA decode kernel, whole sequences", DK::Tma, false, 0});
  return d;
}

// One paged_attention call with decoder d.
std::vector<uint16_t> run_decode(const World& w, const std::vector<Entry>& es, const Decoder& d);

// One paged_attention call; returns the raw bf16 output [n_slots, H * D]. counters: the
// decode kernel combines in its last block; otherwise the combine kernel runs. stagger > 0:
// a step whose sequences share blocks (tma_shared_kv) in that many stagger classes. stored: set to
// the partitions (tile, kv head, partition) the call left in mma_partial (poisoned before).
// group_tiles: group blocks on (tma_group), set to the tiles they read once for their warps.
// prefill_stages, prefill_blocks: the prefill kernel's build (AttentionArgs::prefill_stages,
// prefill_blocks_per_sm).
std::vector<uint16_t> run_step(const World& w, const std::vector<Entry>& es, bool decode,
                               bool counters = true, DK kernel = DK::Split, int tma_config = 0,
                               bool chunk_tail = true, int stagger = 0, int* stored = nullptr,
                               int* group_tiles = nullptr, int prefill_stages = kMmaPrefillStages,
                               int prefill_blocks = kMmaPrefillBlocksPerSm) {
  const int H = w.H, KV = w.KV, D = w.D, row = (H + 2 * KV) * D;
  const int spt = attention_slots_per_tile(DType::BF16, H, KV, D);
  const int n_slots = count_slots(es), n_seqs = int(es.size());
  std::vector<int32_t> slot_start{0}, kv_len, tiles, bt;
  std::vector<float> qkv(size_t(n_slots) * row, 0.0f);
  for (int s = 0; s < n_seqs; s++) {
    const Entry& e = es[size_t(s)];
    REQUIRE(e.kv_len + e.n_new <= w.lens[size_t(e.seq)]);
    for (int j = 0; j < e.n_new; j++)
      for (int h = 0; h < H; h++)
        for (int d = 0; d < D; d++)
          qkv[size_t(slot_start.back() + j) * row + size_t(h) * D + d] =
              qval(e.seq, e.kv_len + j, h, d);
    // Decode: every slot its own tile (a short chunk's slots too, as the backend runs them).
    for (int j0 = 0; j0 < e.n_new; j0 += decode ? 1 : spt)
      tiles.insert(tiles.end(), {s, j0, decode ? 1 : std::min(spt, e.n_new - j0)});
    kv_len.push_back(e.kv_len);
    slot_start.push_back(slot_start.back() + e.n_new);
    bt.insert(bt.end(), w.tables.begin() + size_t(e.seq) * w.bt_stride,
              w.tables.begin() + size_t(e.seq + 1) * w.bt_stride);
  }
  const int n_tiles = int(tiles.size() / 3);
  if (decode) REQUIRE(n_tiles == n_slots);
  Step st(w, qkv, slot_start, kv_len, tiles, bt, w.dk.get(), w.dv.get());
  st.a.decode = decode;
  st.a.decode_kernel = kernel;
  st.a.tma_config = tma_config;
  st.a.tma_chunk_tail = chunk_tail;
  st.a.tma_shared_kv = stagger > 0;
  st.a.tma_stagger = std::max(stagger, 1);
  st.a.prefill_stages = prefill_stages;
  st.a.prefill_blocks_per_sm = prefill_blocks;
  const size_t n_counters = size_t(n_tiles) * KV;
  DevBuf cnt = zero_counters(n_counters);
  if (counters) {
    st.a.mma_counters = cnt.as<int>();
    st.a.mma_counters_len = n_counters;
  }
  DevBuf group_count = zero_counters(1);
  if (group_tiles) {  // group blocks on, their tiles counted
    st.a.tma_group = true;
    st.a.tma_group_tiles = group_count.as<int>();
  }
  LOOM_KERNEL(paged_attention(st.a, nullptr));
  check_counters_zero(cnt, n_counters);
  if (group_tiles)
    LOOM_CUDA_CHECK(cudaMemcpy(group_tiles, group_count.get(), 4, cudaMemcpyDeviceToHost));
  if (stored) {  // a partition's row 0 max: no longer the poison's NaN
    const size_t floats = st.a.mma_partial_floats, stride = size_t(H / KV) * (D + 2);
    std::vector<float> part(floats);
    LOOM_CUDA_CHECK(cudaMemcpy(part.data(), st.part.get(), floats * 4, cudaMemcpyDeviceToHost));
    *stored = 0;
    for (size_t i = 0; i < floats; i += stride) *stored += !std::isnan(part[i + size_t(D)]);
  }
  return download_bits(st.out, size_t(n_slots) * H * D);
}

std::vector<uint16_t> run_decode(const World& w, const std::vector<Entry>& es, const Decoder& d) {
  return run_step(w, es, true, d.counters, d.kernel, d.tma_config);
}

// World w's sequences 0 .. n-1 in sets of 8 whose first 7 hold their set's first sequence's
// blocks for its first keys: 1,746, 100, 256 or 1,000 by set (prefix sharing).
void share_prefix(World& w, int n) {
  for (int s = 0; s < n; s++) {
    const int lead = s - s % 8, shared = std::vector<int>{1746, 100, 256, 1000}[(s / 8) % 4];
    for (int j = 0; s != lead && s % 8 != 7 && j < (shared + w.bs - 1) / w.bs; j++)
      w.tables[size_t(s) * w.bt_stride + j] = w.tables[size_t(lead) * w.bt_stride + j];
  }
}

std::vector<float> to_floats(const std::vector<uint16_t>& bits) {
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < bits.size(); i++) v[i] = bf16_to_f32(bits[i]);
  return v;
}

std::vector<float> reference(const World& w, const std::vector<Entry>& es) {
  const int H = w.H, D = w.D;
  std::vector<float> out(size_t(count_slots(es)) * H * D);
  int slot = 0;
  for (const Entry& e : es) {
    std::vector<float> q(size_t(e.n_new) * H * D);
    for (int j = 0; j < e.n_new; j++)
      for (int h = 0; h < H; h++)
        for (int d = 0; d < D; d++)
          q[(size_t(j) * H + h) * D + d] = qval(e.seq, e.kv_len + j, h, d);
    cpu::attend_sequence(q.data(), H * D, w.kc.data(), w.vc.data(),
                         w.tables.data() + size_t(e.seq) * w.bt_stride, e.kv_len, e.n_new, H, w.KV,
                         D, w.bs, out.data() + size_t(slot) * H * D);
    slot += e.n_new;
  }
  return out;
}

// rel_err within the bf16 tolerance; on failure print the worst element.
void check_close(const std::vector<float>& got, const std::vector<float>& want, int H, int D,
                 const char* what) {
  const double e = rel_err(got, want);
  if (!(e < 1e-2)) {
    size_t worst = 0;
    double wd = -1;
    for (size_t i = 0; i < got.size(); i++) {
      const double d = std::isfinite(got[i]) ? std::fabs(double(got[i]) - want[i]) : INFINITY;
      if (d > wd) wd = d, worst = i;
    }
    const size_t hd = size_t(H) * D;
    std::printf("%s: rel_err %.3g; worst at slot %zu head %zu dim %zu: got %g, want %g\n", what, e,
                worst / hd, worst % hd / D, worst % D, got[worst], want[worst]);
  }
  CHECK(e < 1e-2);
}

// Slot sa of a vs slot sb of b, bitwise; on failure print the first differing element.
bool same_row(const std::vector<uint16_t>& a, int sa, const std::vector<uint16_t>& b, int sb, int H,
              int D, const char* what, int pos) {
  const size_t hd = size_t(H) * D;
  const uint16_t* x = a.data() + size_t(sa) * hd;
  const uint16_t* y = b.data() + size_t(sb) * hd;
  if (std::memcmp(x, y, hd * 2) == 0) return true;
  size_t first = hd, n = 0;
  for (size_t i = 0; i < hd; i++)
    if (x[i] != y[i]) {
      if (first == hd) first = i;
      n++;
    }
  std::printf(
      "NOT batch invariant (%s, position %d): %zu of %zu elements differ; first at head %zu dim "
      "%zu: %04x (%g) vs %04x (%g)\n",
      what, pos, n, hd, first / D, first % D, x[first], bf16_to_f32(x[first]), y[first],
      bf16_to_f32(y[first]));
  return false;
}

struct Shape {
  int heads, kv_heads, head_dim;
};

}  // namespace
