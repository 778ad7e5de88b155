// The megakernel's attention family (contracts: instructions.h): a Qkv tile's RoPE and cache
// write, AttnPartial, AttnReduce. CUDA cores, one partition of K = mega_partition_keys(n_keys,
// attn_splits) keys (32-256: a short context spreads over every split) at a time through shared
// memory: at batch 1–8 a layer's KV is a few MB against ~137 MB of weights, so attention is a
// small share of the step; what matters is that its units spread over the SMs (attn_splits).
//   AttnPartial: thread t scores key t % K of the partition for the query heads h ≡ t / K
//     (mod 512 / K): q·k in fp32 over d in order (16-byte loads of k), times 1/sqrt(head_dim); warp
//     h takes head h's max and Σ exp(s − max) (lane l: keys l, l + 32, … in order, then the xor
//     tree); output (h, d) sums p · v over the keys ≡ q (mod 4) of the partition in order, for
//     q = 0 … 3, then folds those as (s0 + s1) + (s2 + s3). Each partition leaves (acc, max, sum)
//     unnormalised in its own slot, whichever split ran it.
//   In bf16 the scores and P·V run on the tensor cores instead (attention_mma.cuh:
//     fp32 accumulation in the mma's order, P rounded to bf16, the key groups summed in order);
//     the max, Σ p and the fold are the same.
//   AttnReduce: folds partitions 0 … P−1 in order: M = max of the maxima, out = Σ acc·e^(m−M)
//     / Σ sum·e^(m−M).
// So the bits depend on kv_len and K (kv_len and attn_splits), never on the SMs.
// RoPE runs in every Qkv tile (its rows are RoPE pairs) and AttnReduce inside the AttnPartial
// split that completes a (slot, KV head) (cta_publish_last), saving a counter hop each a layer;
// the scheduled AttnReduce instructions are no-ops.
#pragma once

#include "kernels/common.cuh"
#include "kernels/mega/attention_mma.cuh"
#include "kernels/mega/gemv_ops.cuh"

namespace loom::mega {

// A Qkv tile's outputs (run by the tile's CTA after its rows' dots, before its publish): tile
// `unit` holds R / 2 RoPE pairs of one head (mega_qkv_row), dots tile[r · M + b] for row r and
// slot b. A query head's pairs are rotated into qkv, a k head's rotated and a v head's copied
// into the layer's cache at cache_slot[b] (rope_kv_write's arithmetic, on the fp32 dots).
template <class T, int M>
__device__ void qkv_tile_out(const MegaArgs& a, int layer, int unit, const float* tile) {
  const MegaDims& d = a.d;
  const int R = d.rows_per_tile, half = R / 2, hd = d.head_dim;
  const int head = unit / (hd / R);  // of the heads + 2 kv_heads heads of the fused weight
  const int i0 = (unit % (hd / R)) * half;
  for (int j = threadIdx.x; j < half * M; j += kMegaThreads) {
    const int p = j / M, b = j % M, i = i0 + p;
    float y0 = tile[p * M + b], y1 = tile[(p + half) * M + b];
    T* dst;
    if (head < d.heads) {
      dst = static_cast<T*>(a.qkv) + size_t(b) * d.qkv_rows() + size_t(head) * hd;
    } else {
      const bool is_k = head < d.heads + d.kv_heads;
      const int g = head - d.heads - (is_k ? 0 : d.kv_heads);
      dst = static_cast<T*>(is_k ? a.layers[layer].k_cache : a.layers[layer].v_cache) +
            size_t(a.cache_slot[b]) * d.kv_dim() + size_t(g) * hd;
      if (!is_k) {
        dst[i] = from_f32<T>(y0);
        dst[i + hd / 2] = from_f32<T>(y1);
        continue;
      }
    }
    loom::gpu::rope_pair(y0, y1, float(a.positions[b]), a.inv_freq[i], y0, y1);
    dst[i] = from_f32<T>(y0);
    dst[i + hd / 2] = from_f32<T>(y1);
  }
}

// Where attention's shared memory overlaps the weight ring (neither attn_apart nor attn_in_xs),
// the ring's bulk copies may land over it once the CTA barrier that ends the unit has passed:
// every thread orders its ordinary accesses before them first (tma.cuh: the writing threads
// fence; an async-proxy fence takes effect in the thread that runs it).
__device__ __forceinline__ void attn_fence_ring(const MegaArgs& a) {
  if (!a.attn_apart && !a.attn_in_xs) loom::gpu::fence_proxy_async();
}

// AttnReduce's work for u = b · kv_heads + g: attn[b, heads of g] from the partials 0 … parts − 1
// (partitions, or the group path's slots: attention_groups.cuh), in order, through the attention
// buffers (`smem`, `smem_floats`): the partials come in by cp.async, as many partitions as fit at
// once (~35 at bf16 on Terra: one L2 round trip up to ~9,000 keys; MegaArgs::reduce_chunk caps it
// for the tests), the maxima of any others by loads issued beside them. Run by the AttnPartial
// split that completes (b, g) (run_attn_partial), which then publishes AttnReduce; the scheduled
// AttnReduce instructions are skipped.
template <class T>
__device__ void attn_reduce_unit(const MegaArgs& a, int u, void* smem, int smem_floats, int parts) {
  const MegaDims& d = a.d;
  const int G = d.group_size(), hd = d.head_dim, per = mega_partial_floats(G, hd);
  const int b = u / d.kv_heads, g = u % d.kv_heads, tid = threadIdx.x;
  const float* base = a.attn_part + size_t(u) * a.max_parts * per;
  T* out = static_cast<T*>(a.attn);  // in OProj's staged order (mega_xs_elem)
  const int col0 = g * G * hd;
  // Shared memory: the partials' chunk [cap, per]; with more than one chunk, first the maxima
  // [parts, G] (those of partitions ≥ cap filled).
  float* far_max = static_cast<float*>(smem);
  int off = 0, cap = smem_floats / per;
  if (cap < parts || (a.reduce_chunk > 0 && a.reduce_chunk < parts)) {
    off = (parts * G + 3) / 4 * 4;    // the chunk 16-byte aligned
    cap = (smem_floats - off) / per;  // ≥ 1: mega_step checks it
    if (a.reduce_chunk > 0) cap = min(cap, a.reduce_chunk);
  }
  cap = min(cap, parts);
  float* chunk = far_max + off;
  auto load_chunk = [&](int p0) {  // partitions [p0, p0 + cap) ∩ [0, parts)
    const int n4 = (min(parts, p0 + cap) - p0) * per / 4;
    for (int i = tid; i < n4; i += kMegaThreads)
      loom::gpu::cp_async16(reinterpret_cast<uint4*>(chunk) + i,
                            reinterpret_cast<const uint4*>(base + size_t(p0) * per) + i, true);
    loom::gpu::cp_async_commit();
  };
  load_chunk(0);
  for (int i = cap * G + tid; i < parts * G; i += kMegaThreads)
    far_max[i] = __ldcg(base + size_t(i / G) * per + (i % G) * (hd + 2) + hd);
  loom::gpu::cp_async_wait<0>();
  __syncthreads();
  // Output o = (h, e) of thread o, o + 512 …: M = the maxima's max, then Σ acc·e^(m−M) and
  // Σ sum·e^(m−M) over the partitions in order.
  constexpr int kOuts = 16 * 128 / kMegaThreads;  // G · head_dim ≤ 16 · 128
  float mx[kOuts], num[kOuts], den[kOuts];
#pragma unroll
  for (int j = 0; j < kOuts; j++) {
    const int h = (tid + j * kMegaThreads) / hd;
    mx[j] = -INFINITY, num[j] = 0.0f, den[j] = 0.0f;
    if (h < G) {
      for (int p = 0; p < cap; p++) mx[j] = fmaxf(mx[j], chunk[p * per + h * (hd + 2) + hd]);
      for (int p = cap; p < parts; p++) mx[j] = fmaxf(mx[j], far_max[p * G + h]);
    }
  }
  for (int p0 = 0; p0 < parts; p0 += cap) {
    if (p0 > 0) {
      __syncthreads();  // every thread done with the last chunk
      load_chunk(p0);
      loom::gpu::cp_async_wait<0>();
      __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < kOuts; j++) {
      const int o = tid + j * kMegaThreads, h = o / hd, e = o % hd;
      if (h < G)
        for (int p = p0; p < min(parts, p0 + cap); p++) {
          const float* s = chunk + (p - p0) * per + h * (hd + 2);
          const float f = expf(s[hd] - mx[j]);
          num[j] += s[e] * f;
          den[j] += s[hd + 1] * f;
        }
    }
  }
#pragma unroll
  for (int j = 0; j < kOuts; j++) {
    const int o = tid + j * kMegaThreads;
    if (o < G * hd)
      out[mega_xs_elem(a.gemv_mma, d.batch, d.q_dim(), b, col0 + o)] = from_f32<T>(num[j] / den[j]);
  }
  __syncthreads();  // shared memory is the next unit's
}

// The shared-memory row of a partition's k or v: head_dim elements, at 4-8 slots 16 bytes more
// (kv_chunk's swizzle does not run there): rows 16 bytes off a multiple of 128, so the scores'
// 32 lanes (32 neighbouring keys, the same chunk) fall on 8 bank groups, not one, and P·V's
// four keys of a lane group on four.
template <class T>
__host__ __device__ inline int attn_kv_ld(int hd, bool padded) {
  return hd + (padded ? 16 / int(sizeof(T)) : 0);
}

// Shared memory of one attention partition (inside the dynamic buffer).
template <class T>
struct AttnSmem {
  float* q;  // [G, hd] rotated queries (bf16: [G, hd] bf16 in the first half)
  float* s;  // [G, K] scores, then probabilities
  float* m;  // [G] partition max
  float* l;  // [G] Σ p
  T* v;      // [K, ld] values (zero past the last key; ld: attn_kv_ld)
  T* k;      // [K, ld] keys (zero past the last key)
  __device__ AttnSmem(void* base, int G, int hd, int ld) {
    q = static_cast<float*>(base);
    s = q + G * hd;
    m = s + G * kMegaPartitionKeys;
    l = m + G;
    v = reinterpret_cast<T*>(l + G + ((2 * G) & 3 ? 4 - ((2 * G) & 3) : 0));
    k = v + size_t(kMegaPartitionKeys) * ld;
  }
};

template <class T>
__host__ __device__ inline size_t attn_smem_bytes(int G, int hd, bool padded) {
  const int floats = G * hd + G * kMegaPartitionKeys + 2 * G;
  return size_t((floats + 3) / 4 * 4) * 4 +
         2 * size_t(kMegaPartitionKeys) * attn_kv_ld<T>(hd, padded) * sizeof(T);
}

// P·V's key slices a partition (lanes 4j .. 4j + 3 of a warp; folded by xor shuffles): slice
// q holds keys q, q + 4, q + 8, … so the four lanes read four neighbouring scores.
constexpr int kPvSlices = 4;
static_assert(kMegaPartitionKeys % kPvSlices == 0, "whole key slices");

// v[0..3] = p[0..3] as fp32 (8 bytes of bf16 or 16 of fp32, aligned).
__device__ __forceinline__ void load4_f32(const bf16* p, float (&v)[4]) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
  v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ __forceinline__ void load4_f32(const float* p, float (&v)[4]) {
  const float4 f = *reinterpret_cast<const float4*>(p);
  v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
}

// Elements from a layer's cache pool to KV head g's row of key `key`, whose block (the block
// table's entry) is blk: key's offset in its block is key − block_size · (key / block_size).
__device__ __forceinline__ size_t kv_elem(const MegaArgs& a, int blk, int key, int g) {
  const int in = key - int(a.block_div.div(uint32_t(key))) * a.block_size;
  return (size_t(blk) * a.block_size + in) * a.d.kv_dim() + size_t(g) * a.d.head_dim;
}

// KV head g's row of slot b's cache index `key` in the pool `cache`, as 16-byte pieces.
template <class T>
__device__ __forceinline__ const uint4* kv_row(const MegaArgs& a, const T* cache, int b, int g,
                                               int key) {
  const int blk = a.block_tables[size_t(b) * a.bt_stride + int(a.block_div.div(uint32_t(key)))];
  return reinterpret_cast<const uint4*>(cache + kv_elem(a, blk, key, g));
}

// Thread t of kThreads copies the k and v rows of keys [key0, key0 + nk) of slot b's KV head g
// by cp.async, 16-byte piece c = t mod vecs of keys t / vecs + n · (kThreads / vecs) < K to
// dst(is_v, key, c) (a uint4* in shared memory); a key with take(key) false is left alone, rows
// past nk are zero. Four keys' block-table entries are loaded together before their copies
// (bf16 at head_dim 64: all of a 256-key partition's at 512 threads). One commit group.
template <int kThreads, class T, class Dst, class Take>
__device__ __forceinline__ void stage_kv_async(const MegaArgs& a, const T* k_cache,
                                               const T* v_cache, int b, int g, int K, int key0,
                                               int nk, int t, Dst dst, Take take) {
  const int vecs = a.d.head_dim * int(sizeof(T)) / 16, step = kThreads / vecs, c = t % vecs;
  const int* bt = a.block_tables + size_t(b) * a.bt_stride;
  constexpr int kKeys = 4;
  for (int k0 = t / vecs; t < step * vecs && k0 < K; k0 += kKeys * step) {
    int blk[kKeys];  // a key's block (-1: not copied; past nk: zero rows)
#pragma unroll
    for (int q = 0; q < kKeys; q++) {
      const int key = k0 + q * step;
      blk[q] = key < nk && take(key) ? bt[a.block_div.div(uint32_t(key0 + key))] : -1;
    }
#pragma unroll
    for (int q = 0; q < kKeys; q++) {
      const int key = k0 + q * step;
      if (key >= K || (key < nk && blk[q] < 0)) continue;  // past K, or left alone
      const size_t off = blk[q] < 0 ? 0 : kv_elem(a, blk[q], key0 + key, g);
      loom::gpu::cp_async16(dst(true, key, c), reinterpret_cast<const uint4*>(v_cache + off) + c,
                            blk[q] >= 0);
      loom::gpu::cp_async16(dst(false, key, c), reinterpret_cast<const uint4*>(k_cache + off) + c,
                            blk[q] >= 0);
    }
  }
  loom::gpu::cp_async_commit();
}

// AttnPartial unit u's first partition, its cached keys' k and v rows (all but the new key,
// written this step; zero rows past the partition's keys), by cp.async into the attention
// buffers, one commit group, started before the AttnPartial (the keys depend on no counter;
// megakernel.cu says when) when the buffers do not overlap the ring. Nothing between that
// and the AttnPartial waits on cp.async groups (the GEMVs stream by bulk copies). false: the
// unit has no partition (nothing issued).
template <class T>
__device__ bool attn_prefetch(const MegaArgs& a, int layer, uint32_t u, void* smem) {
  const MegaDims& d = a.d;
  const int G = d.group_size(), hd = d.head_dim, S = d.attn_splits;
  const int bg = int(u) / S, j = int(u) % S, b = bg / d.kv_heads, g = bg % d.kv_heads;
  const int n_keys = a.kv_len[b] + 1, K = attn_partition_keys<false>(a, n_keys, S);
  if (j * K >= n_keys) return false;
  const int key0 = j * K, nk = min(K, n_keys - key0), fresh = n_keys - 1 - key0;
  const int vecs = hd * int(sizeof(T)) / 16;
  const T* k_cache = static_cast<const T*>(a.layers[layer].k_cache);
  const T* v_cache = static_cast<const T*>(a.layers[layer].v_cache);
  AttnSmem<T> sm(smem, G, hd, hd);  // (1-2 slots: rows unpadded)
  for (int i = threadIdx.x; i < 2 * K * vecs; i += kMegaThreads) {
    const int key = i / vecs % K;
    if (key == fresh) continue;  // after the wait (run_attn_partial)
    const T* cache = i < K * vecs ? v_cache : k_cache;
    const bool valid = key < nk;
    const uint4* src = valid ? kv_row(a, cache, b, g, key0 + key) + i % vecs
                             : reinterpret_cast<const uint4*>(cache);
    loom::gpu::cp_async16(
        reinterpret_cast<uint4*>((i < K * vecs ? sm.v : sm.k) + size_t(key) * hd) +
            kv_chunk<true>(i < K * vecs, key, i % vecs, vecs),
        src, valid);
  }
  loom::gpu::cp_async_commit();
  return true;
}

// AttnPartial, units u = (b · kv_heads + g) · splits + j: partitions j, j + splits, … of slot
// b's keys [0, kv_len[b]] for the G query heads of group g. The keys cached before this step
// depend on no counter: a unit's first partition loads their k and v rows into shared memory
// before the wait on the group's Qkv tiles, and only q and the new key after it — the cache is read
// from HBM
// (~1-2 µs a round trip while the weights stream), every load of a thread issued before any
// is used.
template <class T, int M>
__device__ bool run_attn_partial(const MegaArgs& a, const MegaCtx& c, int layer, uint32_t begin,
                                 uint32_t end, void* smem, bool prefetched, int& sh_last) {
  constexpr int KS = kMegaPartitionKeys;  // a head's stride in the scores
  static_assert(kMegaThreads % KS == 0 && kMegaMinPartitionKeys % 32 == 0,
                "a partition is whole warps of the CTA");
  constexpr int kVPer = 4;  // 16-byte pieces a thread loads at once
  // k/v rows swizzled (kv_chunk) at 1-2 slots, the only ones attn_prefetch runs at.
  constexpr bool kSwz = M <= 2;
  const MegaDims& d = a.d;
  const int G = d.group_size(), hd = d.head_dim, S = d.attn_splits;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int vecs = hd * int(sizeof(T)) / 16;  // 16-byte pieces of a key or value row
  const T* k_cache = static_cast<const T*>(a.layers[layer].k_cache);
  const T* v_cache = static_cast<const T*>(a.layers[layer].v_cache);
  const int ld = attn_kv_ld<T>(hd, !kSwz);
  AttnSmem<T> sm(smem, G, hd, ld);
  // The scores and P·V on the tensor cores (attention_mma.cuh) in bf16 (mega_step checks
  // attn_mma_fits); at 2 slots as calls (inlined there, ptxas spilled 44 bytes).
  constexpr bool kMmaT = sizeof(T) == 2, kMmaCall = M == 2;
  // k and v rows of keys [key0, key0 + nk) of a K-key partition into shared memory: those with
  // `take(key)` (rows past nk zero, the others left alone).
  auto stage = [&](int b, int g, int K, int key0, int nk, auto take) {
    if constexpr (!kSwz) {  // 4-8 slots: every piece by cp.async at once, one L2 round trip
      stage_kv_async<kMegaThreads>(
          a, k_cache, v_cache, b, g, K, key0, nk, tid,
          [&](bool v, int key, int c) {
            return reinterpret_cast<uint4*>((v ? sm.v : sm.k) + size_t(key) * ld) + c;
          },
          take);
    } else {  // 1-2 slots (whose first partition attn_prefetch stages): kVPer loads at a time
      for (int i0 = tid; i0 < 2 * K * vecs; i0 += kVPer * kMegaThreads) {
        uint4 val[kVPer];
#pragma unroll
        for (int q = 0; q < kVPer; q++) {
          const int i = i0 + q * kMegaThreads, key = i / vecs % K;
          val[q] =
              i < 2 * K * vecs && key < nk && take(key)
                  ? __ldcg(kv_row(a, i < K * vecs ? v_cache : k_cache, b, g, key0 + key) + i % vecs)
                  : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int q = 0; q < kVPer; q++) {
          const int i = i0 + q * kMegaThreads, key = i / vecs % K;
          if (i < 2 * K * vecs && (key >= nk || take(key)))
            reinterpret_cast<uint4*>(
                (i < K * vecs ? sm.v : sm.k) +
                size_t(key) * ld)[kv_chunk<kSwz>(i < K * vecs, key, i % vecs, vecs)] = val[q];
        }
      }
    }
  };
  for (uint32_t u = begin; u < end; u++) {
    const int bg = int(u) / S, j = int(u) % S;
    const int b = bg / d.kv_heads, g = bg % d.kv_heads;
    const int n_keys = a.kv_len[b] + 1;  // the last, n_keys − 1, is written this step
    const int K = attn_partition_keys<false>(a, n_keys, S), parts = (n_keys + K - 1) / K;
    const int kk = tid % K;  // this thread's key of a partition
    // A split without a partition (j ≥ parts) reads, writes and publishes nothing: split 0
    // (which always has one) publishes for it, so the fold waits only for the busy splits, not
    // for the CTAs of idle ones still at earlier instructions (at 600 keys 10 of a KV head's 32
    // splits are busy).
    if (j >= parts) continue;
    const uint32_t arrivals = j == 0 ? 1 + uint32_t(S - min(S, parts)) : 1;
    bool waited = false;
    // The first unit's first partition may be in flight already (attn_prefetch).
    const bool pre = prefetched && u == begin;
    for (int p = j; p < parts; p += S) {
      const int key0 = p * K, nk = min(K, n_keys - key0);
      const int fresh = n_keys - 1 - key0;  // the new key's index in the partition
      if (!(pre && p == j))
        stage(b, g, K, key0, nk, [&](int key) { return waited || key != fresh; });
      if (!waited) {
        if (!cta_wait(c, mega_wait(d, MegaOp::AttnPartial, layer, int(u)))) return false;
        waited = true;
        // q's G heads (chunks of 8 elements) and, when this partition holds it, the new key's
        // k and v rows (16-byte pieces), in one L2 round trip.
        const uint4* q = reinterpret_cast<const uint4*>(
            static_cast<const T*>(a.qkv) + size_t(b) * d.qkv_rows() + size_t(g) * G * hd);
        const int qv = G * hd / 8, kv = fresh < nk ? 2 * vecs : 0;
        for (int i = tid; i < qv + kv; i += kMegaThreads) {
          if (i < qv) {
            Chunk8<T> qc;
#pragma unroll
            for (int v = 0; v < Chunk8<T>::kVecs; v++)
              qc.v[v] = __ldcg(q + i * Chunk8<T>::kVecs + v);
            if constexpr (kMmaT) {  // kept in bf16: the mma's A pairs as they are
              reinterpret_cast<Chunk8<T>*>(sm.q)[i] = qc;
            } else {
              float qf[8];
              chunk_f32<T>(qc, qf);
#pragma unroll
              for (int e = 0; e < 8; e++) sm.q[i * 8 + e] = qf[e];
            }
          } else {
            const int j = i - qv;  // j < vecs: v's pieces, then k's
            const T* cache = j < vecs ? v_cache : k_cache;
            reinterpret_cast<uint4*>((j < vecs ? sm.v : sm.k) +
                                     size_t(fresh) *
                                         ld)[kv_chunk<kSwz>(j < vecs, fresh, j % vecs, vecs)] =
                __ldcg(kv_row(a, cache, b, g, key0 + fresh) + j % vecs);
          }
        }
      }
      if (!kSwz || (pre && p == j)) loom::gpu::cp_async_wait<0>();
      __syncthreads();  // every thread's k and v rows (and q) staged
      if constexpr (kMmaT)
        attn_mma_scores<kSwz, kMmaCall>(reinterpret_cast<const bf16*>(sm.q),
                                        reinterpret_cast<const bf16*>(sm.k), sm.s, KS, G, hd, ld, K,
                                        nk, a.attn_scale);
      // Scores: q·k over d in order.
      float acc[8];
#pragma unroll
      for (int h = 0; h < 8; h++) acc[h] = 0.0f;
      if (kk < nk && !kMmaT)
        for (int e0 = 0; e0 < hd; e0 += 8) {
          // 16-byte loads (lds128): read through a local chunk the compiler split them into
          // 32-bit ones, as it did in the GEMV dot loop (session 57).
          Chunk8<T> kc;
#pragma unroll
          for (int v = 0; v < Chunk8<T>::kVecs; v++)
            kc.v[v] = lds128(reinterpret_cast<const uint4*>(sm.k + size_t(kk) * ld) +
                             kv_chunk<kSwz>(false, kk, e0 * int(sizeof(T)) / 16 + v, vecs));
          float kf[8];
          chunk_f32<T>(kc, kf);
#pragma unroll
          for (int h8 = 0; h8 < 8; h8++) {
            const int h = tid / K + (kMegaThreads / K) * h8;
            if (h < G) {
              const uint4 q0 = lds128(sm.q + h * hd + e0), q1 = lds128(sm.q + h * hd + e0 + 4);
              const float qf[8] = {__uint_as_float(q0.x), __uint_as_float(q0.y),
                                   __uint_as_float(q0.z), __uint_as_float(q0.w),
                                   __uint_as_float(q1.x), __uint_as_float(q1.y),
                                   __uint_as_float(q1.z), __uint_as_float(q1.w)};
#pragma unroll
              for (int e = 0; e < 8; e++) acc[h8] += qf[e] * kf[e];
            }
          }
        }
#pragma unroll
      for (int h8 = 0; h8 < 8; h8++) {
        const int h = tid / K + (kMegaThreads / K) * h8;
        if (h < G && !kMmaT) sm.s[h * KS + kk] = kk < nk ? acc[h8] * a.attn_scale : -INFINITY;
      }
      __syncthreads();
      // Softmax pieces: warp h, head h.
      for (int h = warp; h < G; h += kMegaWarps) {
        float mx = -INFINITY;
        for (int i = lane; i < K; i += 32) mx = fmaxf(mx, sm.s[h * KS + i]);
        mx = loom::gpu::warp_max(mx);
        float sum = 0.0f;
        for (int i = lane; i < K; i += 32) {
          const float e = i < nk ? expf(sm.s[h * KS + i] - mx) : 0.0f;
          if constexpr (kMmaT)  // P in bf16 over the scores (attention_mma.cuh: read, then written)
            *reinterpret_cast<bf16*>(reinterpret_cast<char*>(sm.s + h * KS) +
                                     mega_p_granule(h, i)) = __float2bfloat16(e);
          else
            sm.s[h * KS + i] = e;
          sum += e;
        }
        sum = warp_sum(sum);
        if (lane == 0) sm.m[h] = mx, sm.l[h] = sum;
      }
      __syncthreads();
      // P · V, then the partition's slot: lanes 4j .. 4j + 3 take 4 dims of one head over the
      // partition's key slices 0 .. 3 (each in order), folded (s0 + s1) + (s2 + s3) by xor
      // shuffles. A warp reads 4 neighbouring scores and 4 v rows (swizzled: kv_chunk) a step:
      // 3 shared-memory wavefronts for 4 keys, where an output a thread over all K keys took 8
      // (which bound this phase at ~4 µs a partition).
      float* part = a.attn_part + (size_t(bg) * a.max_parts + p) * mega_partial_floats(G, hd);
      if constexpr (kMmaT)
        attn_mma_pv<kSwz, kMmaCall>(sm.s, KS, reinterpret_cast<const bf16*>(sm.v),
                                    reinterpret_cast<float*>(sm.k), part, G, hd, ld, K);
      const int items = kMmaT ? 0 : G * (hd / 4) * kPvSlices;
      for (int it0 = tid - lane; it0 < items; it0 += kMegaThreads) {  // (warp-uniform trips)
        const int it = it0 + lane, q = it % kPvSlices, o = it / kPvSlices;
        const int h = o / (hd / 4), e0 = (o % (hd / 4)) * 4;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (it < items) {
          // (keys i ≡ q mod 4 all keep chunk c at kv_chunk(true, q, c, vecs))
          const int vo =
              kv_chunk<kSwz>(true, q, e0 * int(sizeof(T)) / 16, vecs) * (16 / int(sizeof(T))) +
              e0 % (16 / int(sizeof(T)));
          const float* sp = sm.s + h * KS;
          const T* vp = sm.v + vo;
#pragma unroll 1
          for (int i = q; i < nk; i += kPvSlices) {
            float v4[4];
            load4_f32(vp + i * ld, v4);
#pragma unroll
            for (int e = 0; e < 4; e++) acc[e] += sp[i] * v4[e];
          }
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
          acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], 1);
          acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], 2);
        }
        if (it < items && q == 0) {
          float* row = part + size_t(h) * (hd + 2);
#pragma unroll
          for (int e = 0; e < 4; e++) row[e0 + e] = acc[e];
          if (e0 == 0) row[hd] = sm.m[h], row[hd + 1] = sm.l[h];
        }
      }
      __syncthreads();  // shared memory is refilled by the next partition
    }
    // The split completing (b, g) folds its partitions at once (AttnReduce, no hop).
    attn_fence_ring(a);
    if (cta_publish_last(c, mega_publish(d, MegaOp::AttnPartial, layer, int(u)),
                         mega_group_units(d, MegaOp::AttnPartial), &sh_last, arrivals)) {
      attn_reduce_unit<T>(a, bg, smem, int(attn_smem_bytes<T>(G, hd, !kSwz) / 4), parts);
      attn_fence_ring(a);
      cta_publish(c, mega_publish(d, MegaOp::AttnReduce, layer, bg));
    }
  }
  return true;
}

}  // namespace loom::mega
