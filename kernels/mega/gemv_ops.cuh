// The megakernel's GEMV family and the ops around it (contracts: instructions.h):
//   Embed, Qkv, OProj, GateUp, Down, FinalNorm, LmHead (+ its draw partials), Draw.
// A GEMV instruction streams its units' weight rows, one row per warp at a time (a tile of 16
// rows is one row for each of the 16 warps; LmHead's 64-row tiles four), in 4 KB segments
// bulk-copied into a per-warp ring in shared memory by one stream over the CTA's whole list
// (WeightStream): weights depend on no counter, so the next instructions' segments are in
// flight while the CTA computes, publishes and waits for its inputs. Inputs are staged in shared
// memory after the wait, as T [batch, k] or (gemv_mma.cuh) in the A fragments' order, read from
// L2 (.cg, cp.async.cg): other SMs wrote them. Qkv and GateUp normalise x; OProj, LmHead and Down
// copy what their producers wrote in that order (stage_flat): GateUp's tiles are gate / up pairs
// and write act = silu(g) · u themselves. Dot order: instructions.h, "GEMV row".
#pragma once

#include "core/philox.h"
#include "kernels/common.cuh"
#include "kernels/mega/gemv_mma.cuh"
#include "kernels/mega/sync.cuh"
#include "kernels/tma.cuh"

namespace loom::mega {

using loom::gpu::bf16;
using loom::gpu::from_f32;
using loom::gpu::to_f32;
using loom::gpu::warp_sum;

// 8 elements of T: one 16-byte load for bf16, two for fp32.
template <class T>
struct Chunk8 {
  static constexpr int kVecs = int(sizeof(T)) / 2;
  uint4 v[kVecs];
};

// Weight rows stream through a ring of kGemvSegBytes slots per warp in shared memory, filled
// by bulk copies (cp.async.bulk: the TMA unit generates the requests, one instruction a 4 KB
// segment) that complete on the slot's mbarrier; MegaArgs::gemv_stages slots per warp (2-3, as
// shared memory allows), so 128-192 KB a CTA are in flight. Registers (16-byte loads, 32-64 KB
// in flight) streamed at ~2.0-2.5 TB/s (bench/NOTES-cuda.md).
constexpr int kGemvSegBytes = 4096;
constexpr int kGemvMaxStages = 3;  // (WeightStream::slot: 2 or 3)

template <class T>
__device__ __forceinline__ void chunk_f32(const Chunk8<T>& c, float (&f)[8]) {
  if constexpr (sizeof(T) == 2) {
    // A bf16 is the high half of its float: one shift or one mask a value (the intrinsic's
    // high half took a PRMT and a shift).
    const uint32_t* h = reinterpret_cast<const uint32_t*>(&c.v[0]);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      f[2 * i] = __uint_as_float(h[i] << 16);
      f[2 * i + 1] = __uint_as_float(h[i] & 0xffff0000u);
    }
  } else {
    const float* p = reinterpret_cast<const float*>(&c.v[0]);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = p[i];
  }
}

// A chunk of shared memory as 16-byte loads (lds128). Read through a reference, the dot
// loop's chunks compiled to four 32-bit loads each, four lanes to a bank: four times the
// shared-memory wavefronts, and the step's most-sampled stall lines (ncu, session 57).
template <class T>
__device__ __forceinline__ Chunk8<T> lds_chunk(const Chunk8<T>* p) {
  Chunk8<T> c;
#pragma unroll
  for (int v = 0; v < Chunk8<T>::kVecs; v++) c.v[v] = lds128(&p->v[v]);
  return c;
}

// Element loads through L2 only (activations other SMs wrote).
__device__ __forceinline__ float ld_cg(const float* p) {
  return __ldcg(p);
}
__device__ __forceinline__ float ld_cg(const bf16* p) {
  return __bfloat162float(__ushort_as_bfloat16(__ldcg(reinterpret_cast<const unsigned short*>(p))));
}

// One GEMV instruction's weight stream as a warp walks it: iteration it is segment it % nb of
// item it / nb; item → (unit, row r of the unit), row r on warp r mod 16. Every warp has the
// same number of iterations (a row past n — a short last lm_head tile — still copies 16 bytes,
// so every ring slot's phases stay in step).
struct GemvJob {
  const char* w;       // the weight's row 0
  uint32_t row_bytes;  // k · sizeof(T)
  int n, R, rpw, nb, iters;
  uint32_t begin;
  int head_dim;  // Qkv: tiles of RoPE pairs (mega_qkv_row)
  int inter;     // GateUp: items of gate / up pairs (mega_gate_up_row); both 0: u · R + r
  const CUtensorMap* map;  // kMma: the weight's tensor map, its tail map next (MegaTmaps)
  FastDiv by_nb, by_rpw;   // / nb, / rpw

  // it / nb: the item (a row of the unit on this warp, or a tensor-core item); it mod nb: the
  // segment of its row; (it / nb) mod rpw: the item within its unit.
  __device__ __forceinline__ int item(int it) const { return int(by_nb.div(uint32_t(it))); }
  __device__ __forceinline__ int seg(int it) const { return it - item(it) * nb; }
  __device__ __forceinline__ int item_in_unit(int it) const {
    const int t = item(it);
    return t - int(by_rpw.div(uint32_t(t))) * rpw;
  }

  // Row of iteration `it` for `warp` (-1: past the tile or the weight), its unit and its row r
  // of the unit.
  __device__ __forceinline__ int row(int it, int warp, uint32_t& unit, int& r) const {
    unit = unit_of(it);
    r = warp + item_in_unit(it) * kMegaWarps;
    return r < R ? row_at(unit, r) : -1;
  }
  // The unit of iteration `it`.
  __device__ __forceinline__ uint32_t unit_of(int it) const {
    return begin + by_rpw.div(uint32_t(item(it)));
  }
  // The weight row of a unit's row r < R (-1: past the weight).
  __device__ __forceinline__ int row_at(uint32_t unit, int r) const {
    if (head_dim > 0) return mega_pair_row(R, head_dim, int(unit), r);
    if (inter > 0) return mega_gate_up_row(R, inter, int(unit), r);
    const int rw = int(unit) * R + r;
    return rw < n ? rw : -1;
  }
  // The weight row of a unit's row r, a multiple of 8, with no test against the weight's end
  // (kMma: the first of a row group's 8 consecutive rows; past the end a box lands zeros).
  __device__ __forceinline__ int row_first(uint32_t unit, int r) const {
    if (head_dim > 0) return mega_pair_row(R, head_dim, int(unit), r);
    if (inter > 0) {
      const int col = int(unit) * (R / 2) + (r >> 4) * 8;
      return (r & 8) ? inter + col : col;
    }
    return int(unit) * R + r;
  }
};

// A warp's weight stream over its CTA's whole program: the segments of every GEMV instruction
// in program order through the warp's ring of S = MegaArgs::gemv_stages slots; segment number
// q (counted from the launch) lives in slot q mod S, whose mbarrier completes its phase
// (q / S) mod 2. `consumed` is every lane's; the issue cursor (WeightCursor) is lane 0's, which
// alone issues. The cursor runs ahead of the consumer by at most S segments and,
// with MegaArgs::gemv_ahead, past the instruction being consumed into the next GEMVs (skipping
// the ops that use no shared memory, idle attention splits included), so the next
// instruction's weights stream while this one's last rows are computed, published and waited
// on; it stops at an AttnPartial with work that has not run yet where attention's buffers
// reach into the ring (neither attn_apart nor attn_in_xs).
// The cursor lives in shared memory (MegaShared::cursor[warp]): it is touched once a segment,
// and in registers it would push the GEMV loop into spills.
struct WeightCursor {
  uint32_t issued;  // segments issued
  int pc;           // program index of the instruction being issued
  int it;           // its next iteration; -1: not opened yet
  GemvJob job;      // its stream
};
struct WeightStream {
  uint32_t consumed = 0;  // segments consumed by this warp

  // S is 2 or 3 (kGemvMaxStages): divisions by constants.
  __device__ __forceinline__ static uint32_t slot(uint32_t q, int S) {
    return S == 2 ? q & 1u : q % 3u;
  }
  __device__ __forceinline__ static uint32_t parity(uint32_t q, int S) {
    return (S == 2 ? q >> 1 : q / 3u) & 1u;
  }
};

// Shared memory of a CTA besides the dynamic buffer.
struct MegaShared {
  float red[kMegaWarps * kMegaMaxBatch];             // per-warp partial sums
  MegaDrawPartial best[kMegaWarps * kMegaMaxBatch];  // per-warp draw partials
  uint64_t bar[kMegaWarps][kGemvMaxStages];          // the weight ring's slots (gemv_ops.cuh)
  int last;                                          // cta_publish_last's answer
  float tile[kMegaMaxTileRows * kMegaMaxBatch];      // a Qkv / GateUp tile's dots [R, M]
  WeightCursor cursor[kMegaWarps];                   // each warp's weight stream's issue side
  const CUtensorMap* tmaps;                          // kMma: the launch's MegaTmaps
  uint64_t t0;                                       // trace: the instruction's start (4-8 slots)
};

// attention_ops.cuh: a Qkv tile's outputs from its dots in MegaShared::tile (RoPE, the cache).
template <class T, int M>
__device__ void qkv_tile_out(const MegaArgs& a, int layer, int unit, const float* tile);

// Columns c, c + 1 (c even) of slot i's staged input: T [M, k] row-major, or kMma: the
// A-fragment order of gemv_mma.cuh (bf16).
template <class T, int M, bool kMma>
__device__ __forceinline__ void xs_store2(T* xs, int k, int i, int c, T lo, T hi) {
  if constexpr (kMma) {
    *xs_word<M>(reinterpret_cast<uint32_t*>(xs), i, c) = pack2(lo, hi);
  } else {
    xs[size_t(i) * k + c] = lo;
    xs[size_t(i) * k + c + 1] = hi;
  }
}

// Slot slot0 + i of dst, a GEMV input of LM slots in its staged order, = T(x[i] · rsqrt(mean(x[i]²)
// + eps) · w) for i < M; x fp32 [M, k] (row stride k, k a multiple of 4). Σ x² order:
// instructions.h, "RMSNorm". 16-byte loads, every slot's load issued before any is used: a pass
// over x costs one L2 round trip (~1 µs while HBM streams). w0: the thread's first 4 weights, w[4
// tid …], which the caller loads before its wait (the weights depend on no counter and come from
// HBM); at batch 1 the thread's first x group stays in registers for the second pass. Ends with a
// barrier.
template <class T, int M, bool kMma, int LM = M>
__device__ void stage_rms_norm(const float* x, int k, const float* w, float4 w0, float eps, T* dst,
                               MegaShared& sh, int slot0 = 0) {
  constexpr bool kKeep = M == 1;  // the first x group stays in registers (more slots spill)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int k4 = k / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float ss[M];
  float4 x0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int i = 0; i < M; i++) ss[i] = 0.0f;
  for (int j = tid; j < k4; j += kMegaThreads) {
    float4 v[M];
#pragma unroll
    for (int i = 0; i < M; i++) v[i] = __ldcg(x4 + size_t(i) * k4 + j);
#pragma unroll
    for (int i = 0; i < M; i++)
      ss[i] += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
    if (kKeep && j == tid) x0 = v[0];
  }
#pragma unroll
  for (int i = 0; i < M; i++) {
    ss[i] = warp_sum(ss[i]);
    if (lane == 0) sh.red[warp * M + i] = ss[i];
  }
  __syncthreads();
  float inv[M];
  if constexpr (M >= 4) {
    // Warp 0 sums each slot's 16 warp partials (lane l: slot l mod M, warps l / M, l / M +
    // 32 / M, …, then xor shuffles) and lanes < M leave its inverse RMS in sh.red[slot]: every
    // thread summing all M · 16 took M · 16 shared loads a thread (ncu, session 60).
    if (warp == 0) {
      float t = 0.0f;
      for (int v = lane / M; v < kMegaWarps; v += 32 / M) t += sh.red[v * M + lane % M];
#pragma unroll
      for (int o = 16; o >= M; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
      if (lane < M) sh.red[lane] = rsqrtf(t / float(k) + eps);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < M; i++) inv[i] = sh.red[i];
  } else {
#pragma unroll
    for (int i = 0; i < M; i++) {
      float t = 0.0f;
      for (int v = 0; v < kMegaWarps; v++) t += sh.red[v * M + i];
      inv[i] = rsqrtf(t / float(k) + eps);
    }
  }
  for (int j = tid; j < k4; j += kMegaThreads) {
    float4 v[M];
#pragma unroll
    for (int i = 0; i < M; i++) v[i] = kKeep && j == tid ? x0 : __ldcg(x4 + size_t(i) * k4 + j);
    const float4 wj = j == tid ? w0 : reinterpret_cast<const float4*>(w)[j];
#pragma unroll
    for (int i = 0; i < M; i++) {
      xs_store2<T, LM, kMma>(dst, k, slot0 + i, 4 * j, from_f32<T>(v[i].x * inv[i] * wj.x),
                             from_f32<T>(v[i].y * inv[i] * wj.y));
      xs_store2<T, LM, kMma>(dst, k, slot0 + i, 4 * j + 2, from_f32<T>(v[i].z * inv[i] * wj.z),
                             from_f32<T>(v[i].w * inv[i] * wj.w));
    }
  }
  __syncthreads();
}

// dst[:n] = src[:n], n elements that other SMs wrote in the staged order already (mega_xs_elem:
// attn, h_last, and act with the tensor-core GEMVs), every 16 bytes by cp.async at once: one L2
// round trip and no registers held, where a loop of 16-byte loads took one round trip per 8 KB (at
// batch 8: 4 for OProj and LmHead, 11 for Down's silu·mul). n · sizeof(T) a multiple of 16.
// Ends with a barrier.
template <class T>
__device__ void stage_flat(const T* src, int n, T* dst) {
  const int v = n * int(sizeof(T)) / 16;
  for (int j = threadIdx.x; j < v; j += kMegaThreads)
    loom::gpu::cp_async16(reinterpret_cast<uint4*>(dst) + j,
                          reinterpret_cast<const uint4*>(src) + j, true);
  loom::gpu::cp_async_commit();
  loom::gpu::cp_async_wait<0>();
  __syncthreads();
}

// T(silu(g) · u) of the fp32 dots g and u, each rounded to T first (GemvIn::SiluMul's
// arithmetic on the graph path's stored gate and up).
template <class T>
__device__ __forceinline__ T silu_mul(float gate, float up) {
  const float g = to_f32(from_f32<T>(gate)), u = to_f32(from_f32<T>(up));
  return from_f32<T>(g / (1.0f + expf(-g)) * u);
}

// A GateUp tile's outputs from its dots tile[r · M + b] (the dot loop; with the tensor-core
// GEMVs mma_item_pair's caller): rows r and r + 8 of each 16 are column c's gate and up
// (mega_gate_up_row), so act[b, c] = silu_mul(gate, up), in Down's staged order ([M, k]).
template <class T, int M>
__device__ void gate_up_tile_out(const MegaDims& d, int unit, const float* tile, T* act) {
  const int half = d.rows_per_tile / 2;
  for (int j = threadIdx.x; j < half * M; j += kMegaThreads) {
    const int p = j / M, b = j % M, r = (p >> 3) * 16 + (p & 7);
    const int col = unit * half + p;
    if (col < d.intermediate)
      act[mega_xs_elem(false, M, d.intermediate, b, col)] =
          silu_mul<T>(tile[r * M + b], tile[(r + 8) * M + b]);
  }
}

__device__ __forceinline__ bool draw_better(float v, int i, float bv, int bi) {
  return bi < 0 || v > bv || (v == bv && i < bi);
}

// A row's draw key (sampler.h: the logit when greedy, else z + gumbel_noise(u), z = logit / T)
// folded into the running best (bv, bi) of its slot over the LmHead instruction's rows this
// lane computes. The exact key costs two fp64 logarithms, so it is computed only where it can
// win: the float estimate v̂ = logit · (1/T) + gumbel_noise_estimate(u) is within d =
// kGumbelEstimateErr + 2^-22 (|z| + 17) of the key (kernels/sampling.cu), so a row whose v̂ is
// below thr − slack (slack ≥ 2d near the top, the device draw's draw_slack) cannot beat thr, a
// key some row of the slot reached (−∞: none yet); the exact winner always passes the test.
// With thr the best over the warp's lanes of the slot, typically ~ln(rows) exact keys a warp.
__device__ __forceinline__ void draw_fold(float logit, int id, const loom::gpu::SampleParamsDev& p,
                                          float thr, float& bv, int& bi) {
  if (p.temperature <= 0.0f) {
    if (draw_better(logit, id, bv, bi)) bv = logit, bi = id;
    return;
  }
  const float u = philox_uniform(p.seed, p.sample_index, p.draw_index, uint32_t(id));
  if (thr > -INFINITY) {
    const float est = logit * (1.0f / p.temperature) + gumbel_noise_estimate(u);
    const float slack = 4.0f * kGumbelEstimateErr + (fabsf(thr) + 32.0f) * (1.0f / 524288.0f);
    if (isfinite(est) && est < thr - slack) return;
  }
  const float key = logit / p.temperature + gumbel_noise(u);
  if (draw_better(key, id, bv, bi)) bv = key, bi = id;
}

enum class GemvOut { Tile, AddX, Logits };  // Tile: Qkv and GateUp (their tile_out)

__device__ __forceinline__ bool mega_is_gemv(MegaOp op) {
  return op == MegaOp::Qkv || op == MegaOp::OProj || op == MegaOp::GateUp || op == MegaOp::Down ||
         op == MegaOp::LmHead;
}

// A GEMV op's weight [n, k] (T, row-major) and its input length k.
template <class T>
__device__ __forceinline__ const T* gemv_weight(const MegaArgs& a, MegaOp op, int layer, int& n,
                                                int& k) {
  const MegaDims& d = a.d;
  const MegaLayer* L = a.layers + (op == MegaOp::LmHead ? 0 : layer);
  switch (op) {
    case MegaOp::Qkv:
      return n = d.qkv_rows(), k = d.hidden, static_cast<const T*>(L->qkv);
    case MegaOp::OProj:
      return n = d.hidden, k = d.q_dim(), static_cast<const T*>(L->o);
    case MegaOp::GateUp:
      return n = 2 * d.intermediate, k = d.hidden, static_cast<const T*>(L->gate_up);
    case MegaOp::Down:
      return n = d.hidden, k = d.intermediate, static_cast<const T*>(L->down);
    default:  // LmHead
      return n = d.vocab, k = d.hidden, static_cast<const T*>(a.lm_head);
  }
}

// kMma: segments of gemv_mma.cuh's geometry (a warp's k part of 8 rows in 256-column pieces).
template <class T, bool kMma>
__device__ __forceinline__ GemvJob gemv_job(const MegaArgs& a, MegaOp op, int layer, uint32_t begin,
                                            uint32_t end) {
  GemvJob j;
  int k = 0;
  j.w = reinterpret_cast<const char*>(gemv_weight<T>(a, op, layer, j.n, k));
  j.row_bytes = uint32_t(k) * uint32_t(sizeof(T));
  j.R = op == MegaOp::LmHead ? a.d.lm_rows_per_tile : a.d.rows_per_tile;
  j.rpw = (j.R + kMegaWarps - 1) / kMegaWarps;
  j.nb = kMma ? (k / kMmaKParts + kMmaSegCols - 1) / kMmaSegCols
              : int((j.row_bytes + kGemvSegBytes - 1) / kGemvSegBytes);
  j.iters = int(end - begin) * j.rpw * j.nb;
  j.by_nb.set(uint32_t(j.nb));
  j.by_rpw.set(uint32_t(j.rpw));
  j.begin = begin;
  j.head_dim = op == MegaOp::Qkv ? a.d.head_dim : 0;
  j.inter = op == MegaOp::GateUp ? a.d.intermediate : 0;
  return j;
}

// Keys of an AttnPartial partition of a (slot, KV head) with n_keys keys over `splits` splits
// (MegaDims::attn_splits) this step: with the tensor-core GEMVs (kMma) the attention groups'
// kAttnGroupKeys (attention_groups.cuh), else mega_partition_keys (attention_ops.cuh). The one
// rule the attention paths and the weight stream's stop share: split j has work when
// j · K < n_keys.
template <bool kMma>
__device__ __forceinline__ int attn_partition_keys(const MegaArgs& a, int n_keys, int splits) {
  return kMma ? kAttnGroupKeys : mega_partition_keys(n_keys, splits, a.attn_min_keys);
}

// Whether AttnPartial units [begin, end) have a partition to compute this step (kv_len on the
// device); idle splits touch no shared memory (attention_ops.cuh), so the stream runs past them.
template <bool kMma>
__device__ __forceinline__ bool attn_partial_busy(const MegaArgs& a, uint32_t begin, uint32_t end) {
  const int S = a.d.attn_splits;
  for (uint32_t u = begin; u < end; u++) {
    const int b = int(u) / S / a.d.kv_heads, j = int(u) % S, n_keys = a.kv_len[b] + 1;
    if (j * attn_partition_keys<kMma>(a, n_keys, S) < n_keys) return true;
  }
  return false;
}

// Lane 0: issues the stream's next segments until `limit` are in flight beyond `consumed`
// (consumer_pc: the instruction being run; prog_end: the program's end).
template <class T, bool kMma>
__device__ void pump(const MegaArgs& a, WeightStream& ws, int consumer_pc, int prog_end, int limit,
                     char* ring, MegaShared& sh) {
  const int warp = threadIdx.x >> 5, S = a.gemv_stages;
  WeightCursor& cur = sh.cursor[warp];
  const uint64_t policy = loom::gpu::l2_policy(a.weights_evict_first);
  while (cur.issued - ws.consumed < uint32_t(limit)) {
    if (cur.it < 0 || cur.it >= cur.job.iters) {  // open the next GEMV instruction
      if (cur.it >= 0) cur.pc++, cur.it = -1;
      if (cur.pc >= prog_end || (cur.pc > consumer_pc && !a.gemv_ahead)) return;
      const MegaInstruction in = a.instrs[cur.pc];
      const MegaOp op = MegaOp(in.op);
      if (mega_is_gemv(op)) {
        cur.job = gemv_job<T, kMma>(a, op, in.layer, in.begin, in.end);
        if constexpr (kMma) cur.job.map = sh.tmaps + mega_tmap_index(a.d, op, in.layer);
        cur.it = 0;
      } else if (op == MegaOp::AttnPartial && !a.attn_apart && !a.attn_in_xs &&
                 cur.pc >= consumer_pc && attn_partial_busy<kMma>(a, in.begin, in.end)) {
        return;  // its shared memory overlaps the ring: nothing may land there before it ran
      } else {
        cur.pc++;  // no shared memory of the ring's (embed, no-ops, final norm, draw)
      }
      continue;
    }
    const uint32_t s = WeightStream::slot(cur.issued, S);
    uint64_t* bar = &sh.bar[warp][s];
    char* dst = ring + (size_t(warp) * S + s) * kGemvSegBytes;
    loom::gpu::fence_proxy_async();  // the slot's earlier reads before the copy's writes
    if constexpr (kMma) {
      mma_issue_segment(cur.job, cur.it, warp, dst, bar, policy);
    } else {
      uint32_t unit;
      int r;
      const int row = cur.job.row(cur.it, warp, unit, r);
      const uint32_t off = uint32_t(cur.job.seg(cur.it)) * kGemvSegBytes;
      const uint32_t bytes = row >= 0 ? min(uint32_t(kGemvSegBytes), cur.job.row_bytes - off) : 16u;
      loom::gpu::mbar_expect_tx(bar, bytes);
      loom::gpu::bulk_load(dst, cur.job.w + (row >= 0 ? size_t(row) * cur.job.row_bytes + off : 0),
                           bytes, bar, policy);
    }
    cur.it++;
    cur.issued++;
  }
}

// A CTA leaving an abandoned step first waits for every copy its warps issued (none may land
// after the CTA left).
__device__ __forceinline__ void drain(const MegaArgs& a, const WeightStream& ws, MegaShared& sh) {
  const int warp = threadIdx.x >> 5, S = a.gemv_stages;
  const uint32_t issued = sh.cursor[warp].issued;
  for (uint32_t q = ws.consumed; q != issued; q++)
    loom::gpu::mbar_wait(&sh.bar[warp][ws.slot(q, S)], ws.parity(q, S));
}

// Runs units [begin, end) of a GEMV op (Qkv, OProj, GateUp, Down, LmHead), instruction `pc` of
// a program ending at `prog_end`. A unit is a tile of R rows (rows_per_tile; LmHead
// lm_rows_per_tile), row r of a tile on warp r mod 16, each row in segments through the warp's
// ring (WeightStream); the tile is published after a CTA barrier (cta_publish; a Qkv tile
// first rotates its RoPE pairs and writes k and v into the cache). kLm: op is LmHead at 1-2
// slots (its draw's state stays out of the layer GEMVs' loop; at 4-8 slots LmHead runs the
// layers' instantiation, which measured faster there). kMma: the tensor-core form of
// gemv_mma.cuh (bf16, 4-8 slots; `part` its kMmaPartBytes of D). false: abandoned.
template <class T, int M, bool kLm, bool kMma>
__device__ bool run_gemv(const MegaArgs& a, const MegaCtx& c, MegaOp op, int layer, uint32_t begin,
                         uint32_t end, int pc, int prog_end, T* xs, char* ring, float* part,
                         WeightStream& ws, MegaShared& sh) {
  constexpr int U = kGemvSegBytes / int(sizeof(Chunk8<T>)) / 32;  // chunks a segment per lane
  const MegaDims& d = a.d;
  const MegaLayer* L = op == MegaOp::LmHead ? nullptr : a.layers + layer;
  const GemvJob job = gemv_job<T, kMma>(a, op, layer, begin, end);
  const int k = int(job.row_bytes / sizeof(T));
  GemvOut out = GemvOut::Tile;
  T* y = nullptr;  // GateUp: act
  if (op == MegaOp::GateUp) y = static_cast<T*>(a.gu);
  if (op == MegaOp::OProj || op == MegaOp::Down) out = GemvOut::AddX;
  if (kLm || op == MegaOp::LmHead) out = GemvOut::Logits;  // (kLm: known at compile time)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k8 = k / 8, nb = job.nb, rpw = job.rpw, iters = job.iters;
  const int S = a.gemv_stages;
  const uint32_t seq = ws.consumed;  // this instruction's iteration it is segment seq + it
  Chunk8<T>* wring = reinterpret_cast<Chunk8<T>*>(ring + size_t(warp) * S * kGemvSegBytes);

  float acc[kMma ? 4 : M];  // kMma: the warp's D fragment (gemv_mma.cuh)
  // LmHead's draw at 1-2 slots runs on every lane: a warp's row t, slot i is pending on lane
  // (t · M + i) mod 32 (so lane l keeps slot l mod M) until 32 / M rows are pending, then each
  // lane folds its own (pv, pr) into its running best (bv, bi) of slot l mod M, filtered by the
  // slot's best on the warp; one lane folding every row spent ~45 µs a batch-1 step of the
  // lm_head's weight stream in the draw's dependent chain. At 4-8 slots (compute-bound, lanes
  // 0 … M−1 each drawing a row's slot) lane i < M folds slot i's row at once, which measured
  // faster there.
  float bv = -INFINITY, pv = 0.0f;
  int bi = -1, pr = -1;
  uint32_t run = 0;  // units done since the last publish
  const int lo = a.sample_lo, hi = a.sample_hi;
  // After a row's last segment: at a unit's end (the same iteration on every warp), LmHead's
  // draw partials, a Qkv tile's RoPE and cache write, and the publish.
  auto unit_end = [&](int it, uint32_t unit) {
    if (job.item_in_unit(it) != rpw - 1) return;  // the unit goes on for this warp
    if (out == GemvOut::Logits && unit + 1 == end) {
      // Lanes of one slot fold into lane i < M; the instruction's best per slot goes to its first
      // tile's partial, none to the others.
#pragma unroll
      for (int o = 16; o >= M; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && draw_better(ov, oi, bv, bi)) bv = ov, bi = oi;
      }
      if (lane < M) sh.best[warp * M + lane] = MegaDrawPartial{bv, bi};
      __syncthreads();
      for (int j = threadIdx.x; j < int(end - begin) * M; j += kMegaThreads) {
        MegaDrawPartial r{-INFINITY, -1};
        if (j < M)
          for (int v = 0; v < kMegaWarps; v++) {
            const MegaDrawPartial q = sh.best[v * M + j];
            if (q.id >= 0 && draw_better(q.v, q.id, r.v, r.id)) r = q;
          }
        a.draw_part[size_t(begin) * M + j] = r;
      }
    }
    if (op == MegaOp::Qkv) {
      __syncthreads();
      qkv_tile_out<T, M>(a, layer, int(unit), sh.tile);
    } else if (op == MegaOp::GateUp && !kMma) {
      __syncthreads();
      gate_up_tile_out<T, M>(d, int(unit), sh.tile, y);
    }
    // Consecutive units of one counter publish together, with one barrier and one release:
    // OProj, GateUp, Down and LmHead are waited on as a whole, so a CTA publishes each once. Qkv
    // and (but with kMma) GateUp tiles reuse shared memory (sh.tile): theirs keep a barrier.
    const uint32_t counter = mega_publish(d, op, layer, int(unit));
    run++;
    if (unit + 1 == end || mega_publish(d, op, layer, int(unit) + 1) != counter) {
      cta_publish(c, counter, run);
      run = 0;
    } else if (op == MegaOp::Qkv || (op == MegaOp::GateUp && !kMma)) {
      __syncthreads();
    }
  };
  // A row's output for slot i (any op but LmHead's draw at 1-2 slots without kMma, below).
  auto emit = [&](int row, int r, int i, float val) {
    if (out == GemvOut::Tile) {
      sh.tile[r * M + i] = val;  // stored by qkv_tile_out / gate_up_tile_out
    } else if (out == GemvOut::AddX) {
      // x += val as a reduction in the L2 (the atomic's result unused: no return to wait for):
      // one writer an element an op, so the same single fp32 add as a load and a store (but
      // for subnormals, which the atomic flushes to zero), without the load's round trip
      // before the unit's publish (bench/NOTES-cuda.md, session 61).
      atomicAdd(a.x + size_t(i) * d.hidden + row, val);
    } else {
      a.logits[size_t(i) * a.logits_ld + row] = val;
      const loom::gpu::SampleParamsDev& p = a.params[i];
      if ((M > 2 || kMma) && p.active && row >= lo && row < hi)
        draw_fold(val, row - lo, p, bv, bv, bi);
    }
  };
  // Iteration `it`: the dots of its segment in the ring (every lane's loads issued here), then,
  // at a row's last segment, the rest of the row before its slot is refilled.
  auto consume = [&](int it) {
    const uint32_t q = seq + uint32_t(it);
    const Chunk8<T>* wv = wring + size_t(ws.slot(q, S)) * 32 * U + lane;  // wv[u * 32]
    loom::gpu::mbar_wait(&sh.bar[warp][ws.slot(q, S)], ws.parity(q, S));
    const int b = job.seg(it);
    if (b == 0)
#pragma unroll
      for (int i = 0; i < (kMma ? 4 : M); i++) acc[i] = 0.0f;
    if constexpr (kMma) {
      const int kw = k / kMmaKParts;
      if (!a.skip_math)
        mma_segment<M>(acc, loom::gpu::smem_u32(wv - lane), reinterpret_cast<const uint4*>(xs),
                       (warp % kMmaKParts) * kw + b * kMmaSegCols,
                       min(kMmaSegCols, kw - b * kMmaSegCols));
      if (b != nb - 1) return;
      const uint32_t unit = job.unit_of(it);
      int i, s;
      float val, up;
      if (op == MegaOp::GateUp) {  // act of column i of the item, slot s, in Down's staged order
        if (mma_item_pair<M>(acc, part, i, s, val, up)) {
          // Column i of the item's 8 (its gate row, mega_gate_up_row: the same formula, kept
          // apart from the row mapping's dispatch, which changed the mma path's code).
          const int col = int(unit) * (job.R / 2) + job.item_in_unit(it) * 8 + i;
          if (col < d.intermediate)
            y[mega_xs_elem(true, M, d.intermediate, s, col)] = silu_mul<T>(val, up);
        }
      } else if (mma_item_out<M>(acc, part, i, s, val)) {
        const int r = job.item_in_unit(it) * 16 + (warp / kMmaKParts) * 8 + i;
        const int row = job.row_at(unit, r);
        if (row >= 0) emit(row, r, s, val);
      }
      unit_end(it, unit);
      return;
    }
    const int c0 = b * 32 * U;
    const Chunk8<T>* xc8 = reinterpret_cast<const Chunk8<T>*>(xs);  // [M][k8]
    auto dot = [&](int u) {
      const int ck = c0 + u * 32 + lane;
      float wf[8];
      chunk_f32<T>(lds_chunk(wv + u * 32), wf);
#pragma unroll(sizeof(T) == 2 ? M : 2)
      for (int i = 0; i < M; i++) {
        float xf[8];
        chunk_f32<T>(lds_chunk(xc8 + size_t(i) * k8 + ck), xf);
#pragma unroll
        for (int e = 0; e < 8; e++) acc[i] += wf[e] * xf[e];
      }
    };
    // A whole segment (every row's but a short last one) without a test per chunk, so that
    // the chunks' loads can be issued together. f32 (the exactness tests' build) unrolls
    // less: its 32-byte chunks would spill at 4-8 slots.
    if (!a.skip_math && c0 + 32 * U <= k8) {
#pragma unroll(sizeof(T) == 2 ? U : 1)
      for (int u = 0; u < U; u++) dot(u);
    } else if (!a.skip_math) {
#pragma unroll(sizeof(T) == 2 ? U : 1)
      for (int u = 0; u < U; u++)
        if (c0 + u * 32 + lane < k8) dot(u);
    }
    // The row's last segment: its sum and store, LmHead's draw, a unit's end.
    if (b != nb - 1) return;
    uint32_t unit;
    int r;
    const int row = job.row(it, warp, unit, r);
#pragma unroll
    for (int i = 0; i < M; i++) acc[i] = warp_sum(acc[i]);
    if (row >= 0 && lane < M) {
      float val = 0.0f;
#pragma unroll
      for (int i = 0; i < M; i++)
        if (i == lane) val = acc[i];
      emit(row, r, lane, val);
    }
    if constexpr (kLm && M <= 2) {
      const int t = job.item(it), batch = 32 / M, i = lane % M;  // this warp's row t
      if (lane / M == t % batch) {
#pragma unroll
        for (int s = 0; s < M; s++)
          if (s == i) pv = acc[s];
        pr = row >= 0 && a.params[i].active && row >= lo && row < hi ? row - lo : -1;
      }
      if (t % batch == batch - 1 || it == iters - 1) {
        float thr = bv;  // the best key of slot i on the warp's lanes so far
#pragma unroll
        for (int o = 16; o >= M; o >>= 1) thr = fmaxf(thr, __shfl_xor_sync(0xffffffffu, thr, o));
        if (pr >= 0) draw_fold(pv, pr, a.params[i], thr, bv, bi);
        pr = -1;
      }
    }
    unit_end(it, unit);
  };

  // While the CTA waits for its input at most gemv_early segments a warp are in flight (those
  // the stream started earlier included), the rest of the ring's after the input is staged:
  // the staging's L2 reads queue behind the copies in flight.
  // The norm's weights are loaded before the wait too (stage_rms_norm's w0).
  const float* norm_w = op == MegaOp::Qkv      ? L->attn_norm
                        : op == MegaOp::GateUp ? L->mlp_norm
                                               : nullptr;
  const float4 w0 = norm_w != nullptr && int(threadIdx.x) < k / 4
                        ? reinterpret_cast<const float4*>(norm_w)[threadIdx.x]
                        : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int early = op == MegaOp::Down ? a.gemv_early_down : a.gemv_early;
  if (lane == 0) pump<T, kMma>(a, ws, pc, prog_end, min(early, S), ring, sh);
  if (!cta_wait(c, mega_wait(d, op, layer, int(begin)))) return false;  // the caller drains
  switch (op) {
    case MegaOp::Qkv:
    case MegaOp::GateUp:
      stage_rms_norm<T, M, kMma>(a.x, k, norm_w, w0, a.eps, xs, sh);
      break;
    case MegaOp::OProj:
      stage_flat<T>(static_cast<const T*>(a.attn), M * k, xs);
      break;
    case MegaOp::Down:
      stage_flat<T>(static_cast<const T*>(a.gu), M * k, xs);
      break;
    default:
      stage_flat<T>(static_cast<const T*>(a.h_last), M * k, xs);
      break;
  }
  if (c.trace && threadIdx.x == 0) c.staged = global_ns();
  const int F = a.gemv_inflight > 0 ? min(a.gemv_inflight, S) : S;
  if (lane == 0) pump<T, kMma>(a, ws, pc, prog_end, F, ring, sh);
  for (int it = 0; it < iters; it++) {
    consume(it);
    __syncwarp();  // every lane is done with the slot before it is refilled
    ws.consumed = seq + uint32_t(it) + 1;
    if (lane == 0) pump<T, kMma>(a, ws, pc, prog_end, F, ring, sh);
  }
  return true;
}

// Embed: x[i, cols of unit u] for every slot (embed_assemble's arithmetic).
template <class T, int M>
__device__ void run_embed(const MegaArgs& a, const MegaCtx& c, uint32_t begin, uint32_t end) {
  const MegaDims& d = a.d;
  const T* embed = static_cast<const T*>(a.embed);
  for (uint32_t u = begin; u < end; u++) {
    const int c0 = int(u) * d.embed_cols, c1 = min(d.hidden, c0 + d.embed_cols);
    for (int j = threadIdx.x; j < M * (c1 - c0); j += kMegaThreads) {
      const int i = j / (c1 - c0), col = c0 + j % (c1 - c0);
      float v = to_f32(embed[size_t(a.tokens[i]) * d.hidden + col]);
      if (a.pos_spatial != nullptr) {
        const int p = a.positions[i];
        v += a.pos_spatial[size_t(p % a.frame_slots) * d.hidden + col] +
             a.pos_temporal[size_t(p / a.frame_slots) * d.hidden + col];
      }
      a.x[size_t(i) * d.hidden + col] = v;
    }
    jitter(c.jitter_seed, 3, u, c.epoch);
    cta_publish(c, mega_publish(d, MegaOp::Embed, 0, int(u)));
  }
}

// FinalNorm: h_last[b] = T(RMSNorm(x[b]) · final_norm), in LmHead's staged order.
template <class T, int M, bool kMma>
__device__ bool run_final_norm(const MegaArgs& a, const MegaCtx& c, uint32_t begin, uint32_t end,
                               MegaShared& sh) {
  const MegaDims& d = a.d;
  for (uint32_t b = begin; b < end; b++) {
    if (!cta_wait(c, mega_wait(d, MegaOp::FinalNorm, 0, int(b)))) return false;
    const float4 w0 = int(threadIdx.x) < d.hidden / 4
                          ? reinterpret_cast<const float4*>(a.final_norm)[threadIdx.x]
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    stage_rms_norm<T, 1, kMma, M>(a.x + size_t(b) * d.hidden, d.hidden, a.final_norm, w0, a.eps,
                                  static_cast<T*>(a.h_last), sh, int(b));
    cta_publish(c, mega_publish(d, MegaOp::FinalNorm, 0, int(b)));
  }
  return true;
}

// Draw: slot b's token from the LmHead tiles' partials (a max over a total order: the same
// token whatever the fold order).
template <int M>
__device__ bool run_draw(const MegaArgs& a, const MegaCtx& c, uint32_t begin, uint32_t end,
                         MegaShared& sh) {
  const MegaDims& d = a.d;
  const int tiles = mega_units(d, MegaOp::LmHead);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (uint32_t b = begin; b < end; b++) {
    if (!cta_wait(c, mega_wait(d, MegaOp::Draw, 0, int(b)))) return false;
    float bv = -INFINITY;
    int bi = -1;
    for (int t = threadIdx.x; t < tiles; t += kMegaThreads) {
      const MegaDrawPartial* p = a.draw_part + size_t(t) * M + b;
      const float v = __ldcg(&p->v);
      const int i = __ldcg(&p->id);
      if (i >= 0 && draw_better(v, i, bv, bi)) bv = v, bi = i;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (oi >= 0 && draw_better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if (lane == 0) sh.best[warp] = MegaDrawPartial{bv, bi};
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int v = 1; v < kMegaWarps; v++) {
        const MegaDrawPartial q = sh.best[v];
        if (q.id >= 0 && draw_better(q.v, q.id, bv, bi)) bv = q.v, bi = q.id;
      }
      a.tokens_out[b] = a.params[b].active ? bi : -1;
    }
    __syncthreads();
  }
  return true;
}

}  // namespace loom::mega
