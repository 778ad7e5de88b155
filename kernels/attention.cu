#include <cfloat>

#include "kernels/attention.cuh"
#include "kernels/common.cuh"
#include "kernels/kv_quant.cuh"

namespace loom::gpu {

constexpr int kKeys = 64;  // keys per shared-memory tile
constexpr int kAttnThreads = 256;
constexpr int kMinSplitKeys = 128;
constexpr int kMaxSplits = 128;
constexpr int kDecodeKeys = 128;  // decode kernel: keys per pass

template <int D>
struct AttnSmem {
  // Offsets in floats into dynamic shared memory.
  static constexpr int kQ = 0;                       // [kAttnRows][D], pre-scaled
  static constexpr int kK = kQ + kAttnRows * D;      // [kKeys][D + 1] (padded: no conflicts)
  static constexpr int kV = kK + kKeys * (D + 1);    // [kKeys][D]
  static constexpr int kS = kV + kKeys * D;          // [kAttnRows][kKeys] scores, then p
  static constexpr int kM = kS + kAttnRows * kKeys;  // [kAttnRows] running max
  static constexpr int kL = kM + kAttnRows;          // [kAttnRows] running sum
  static constexpr int kAlpha = kL + kAttnRows;      // [kAttnRows] rescale of this tile
  static constexpr int kFloats = kAlpha + kAttnRows;
  static constexpr size_t kBytes = size_t(kFloats) * sizeof(float);
};

// Keys per split: at least kMinSplitKeys so that a short context is not cut into slivers
// (each split costs a partial write and a share of the combine), a multiple of kKeys.
// Decode splits are whole passes of kDecodeKeys keys (one key per thread).
__device__ __forceinline__ int split_keys(int total, int num_splits, bool decode) {
  const int granule = decode ? kDecodeKeys : kKeys;
  int per = max((total + num_splits - 1) / num_splits, decode ? kDecodeKeys : kMinSplitKeys);
  return (per + granule - 1) / granule * granule;
}

template <class T, class KV, int D>
__global__ void __launch_bounds__(kAttnThreads) paged_attention_kernel(AttentionArgs a) {
  using L = AttnSmem<D>;
  extern __shared__ float smem[];
  float* q_s = smem + L::kQ;
  float* k_s = smem + L::kK;
  float* v_s = smem + L::kV;
  float* s_s = smem + L::kS;
  float* m_s = smem + L::kM;
  float* l_s = smem + L::kL;
  float* alpha_s = smem + L::kAlpha;

  // Let a programmatically dependent GEMV start streaming its weights now.
  pdl_trigger();
  pdl_wait();
  const int tid = threadIdx.x;
  const int tile = blockIdx.x, hkv = blockIdx.y, split = blockIdx.z;
  const int seq = a.tiles[tile * 3], j0 = a.tiles[tile * 3 + 1], nj = a.tiles[tile * 3 + 2];
  const int G = a.heads / a.kv_heads;
  const int n_rows = nj * G;
  const int kvl = a.kv_len[seq];
  const int total = kvl + j0 + nj;  // keys any row of this tile may see
  const int per = split_keys(total, a.num_splits, a.decode);
  const int k_begin = split * per;
  const int k_end = min(total, k_begin + per);
  if (k_begin >= k_end) return;  // past the last active split (the combine skips it too)
  const size_t blk = (size_t(tile) * a.kv_heads + hkv) * a.num_splits + split;

  const int q_stride = (a.heads + 2 * a.kv_heads) * D;
  const int first_slot = a.slot_start[seq] + j0;
  const float scale = rsqrtf(float(D)) * kv_scale_of(a.kv_scale, a.kv_heads, hkv, false);
  const float v_scale = kv_scale_of(a.kv_scale, a.kv_heads, hkv, true);
  const T* qkv = static_cast<const T*>(a.qkv);

  // K/V tiles move as 16-byte vectors, prefetched into registers one tile ahead.
  constexpr int kVec = 16 / int(sizeof(KV));
  constexpr int kPerRow = D / kVec;       // vectors per key row of one head
  constexpr int kVecs = kKeys * kPerRow;  // vectors per tile (K or V)
  constexpr int kLoads = (kVecs + kAttnThreads - 1) / kAttnThreads;
  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);
  const int32_t* bt = a.block_tables + size_t(seq) * a.bt_stride;
  const size_t kv_row = size_t(a.kv_heads) * D;
  uint4 kr[kLoads], vr[kLoads];
  auto fetch = [&](int t0) {
#pragma unroll
    for (int l = 0; l < kLoads; l++) {
      const int idx = tid + l * kAttnThreads;
      const int key = t0 + idx / kPerRow;
      kr[l] = vr[l] = make_uint4(0, 0, 0, 0);
      if (idx < kVecs && key < k_end) {
        const int phys = bt[key / a.block_size];
        const size_t src = (size_t(phys) * a.block_size + key % a.block_size) * kv_row +
                           size_t(hkv) * D + (idx % kPerRow) * kVec;
        kr[l] = *reinterpret_cast<const uint4*>(kc + src);
        vr[l] = *reinterpret_cast<const uint4*>(vc + src);
      }
    }
  };
  auto store = [&]() {
#pragma unroll
    for (int l = 0; l < kLoads; l++) {
      const int idx = tid + l * kAttnThreads;
      if (idx < kVecs) {
        const int kk = idx / kPerRow, d0 = (idx % kPerRow) * kVec;
        const KV* ke = reinterpret_cast<const KV*>(&kr[l]);
        const KV* ve = reinterpret_cast<const KV*>(&vr[l]);
#pragma unroll
        for (int e = 0; e < kVec; e++) {
          k_s[kk * (D + 1) + d0 + e] = to_f32(ke[e]);
          v_s[kk * D + d0 + e] = to_f32(ve[e]);
        }
      }
    }
  };
  fetch(k_begin);

  for (int i = tid; i < kAttnRows * D; i += kAttnThreads) {
    const int r = i / D, d = i % D;
    float v = 0.0f;
    if (r < n_rows) {
      const int slot = first_slot + r / G, head = hkv * G + r % G;
      v = to_f32(qkv[size_t(slot) * q_stride + head * D + d]) * scale;
    }
    q_s[i] = v;
  }
  if (tid < kAttnRows) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }

  constexpr int kRowsPerPass = kAttnThreads / D;  // PV: thread → (d, rows)
  constexpr int kOut = kAttnRows / kRowsPerPass;
  const int od = tid % D, orow = tid / D;
  float acc[kOut];
#pragma unroll
  for (int i = 0; i < kOut; i++) acc[i] = 0.0f;

  for (int t0 = k_begin; t0 < k_end; t0 += kKeys) {
    __syncthreads();  // previous tile fully consumed (and q_s/m_s written on the first pass)
    store();
    __syncthreads();
    if (t0 + kKeys < k_end) fetch(t0 + kKeys);  // in flight while this tile is computed
    {
      const int kk = tid % kKeys;
      const int key = t0 + kk;
#pragma unroll
      for (int i = 0; i < kAttnRows * kKeys / kAttnThreads; i++) {
        const int r = tid / kKeys + i * (kAttnThreads / kKeys);
        if (r < n_rows) {
          float s = -INFINITY;
          const int limit = kvl + j0 + r / G;  // causal: keys [0, limit]
          if (key < k_end && key <= limit) {
            s = 0.0f;
#pragma unroll 16
            for (int d = 0; d < D; d++) s += q_s[r * D + d] * k_s[kk * (D + 1) + d];
          }
          s_s[r * kKeys + kk] = s;
        }
      }
    }
    __syncthreads();
    {
      const int lane = tid & 31, warp = tid >> 5;
      for (int r = warp; r < n_rows; r += kAttnThreads / 32) {
        const float s0 = s_s[r * kKeys + lane], s1 = s_s[r * kKeys + lane + 32];
        const float m_old = m_s[r];
        const float m_new = fmaxf(m_old, warp_max(fmaxf(s0, s1)));
        float p0 = 0.0f, p1 = 0.0f, alpha = 1.0f;
        if (m_new != -INFINITY) {
          p0 = expf(s0 - m_new);
          p1 = expf(s1 - m_new);
          alpha = expf(m_old - m_new);
        }
        s_s[r * kKeys + lane] = p0;
        s_s[r * kKeys + lane + 32] = p1;
        const float sum = warp_sum(p0 + p1);
        if (lane == 0) {
          l_s[r] = l_s[r] * alpha + sum;
          m_s[r] = m_new;
          alpha_s[r] = alpha;
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kOut; i++) {
      const int r = orow + i * kRowsPerPass;
      if (r < n_rows) {
        float v = acc[i] * alpha_s[r];
#pragma unroll 8
        for (int kk = 0; kk < kKeys; kk++) v += s_s[r * kKeys + kk] * v_s[kk * D + od];
        acc[i] = v;
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kOut; i++) acc[i] *= v_scale;

  const bool single = (total + per - 1) / per == 1;  // one active split: write the output
  if (single) {
    T* out = static_cast<T*>(a.out);
#pragma unroll
    for (int i = 0; i < kOut; i++) {
      const int r = orow + i * kRowsPerPass;
      if (r < n_rows) {
        const int slot = first_slot + r / G, head = hkv * G + r % G;
        out[size_t(slot) * a.heads * D + head * D + od] = from_f32<T>(acc[i] / l_s[r]);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kOut; i++) {
      const int r = orow + i * kRowsPerPass;
      if (r < n_rows) a.partial_o[(blk * kAttnRows + r) * D + od] = acc[i];
    }
    for (int r = tid; r < n_rows; r += kAttnThreads) {
      a.partial_ml[(blk * kAttnRows + r) * 2] = m_s[r];
      a.partial_ml[(blk * kAttnRows + r) * 2 + 1] = l_s[r];
    }
  }
}

// Decode (one new slot per tile, G ≤ kDecodeMaxG): a block takes one pass of kDecodeKeys
// keys with kParts threads per key, neighbouring lanes: each loads its share of the key's K
// and V rows (16-byte vectors; the cached keys before waiting for the previous kernel), forms
// partial dot products for all G heads over its dims and the kParts lanes sum them with
// shuffles; the block reduces max and sum per head; V goes to shared memory and each thread
// accumulates (head, dim) outputs over the pass. Many threads with short serial work: a
// decode step has few blocks, so per-thread latency is what counts.
template <class KV, int D>
struct DecodeCfg {
  static constexpr int kVec = 16 / int(sizeof(KV));         // elements per 16-byte vector
  static constexpr int kPerRow = D / kVec;                  // vectors per key row of one head
  static constexpr int kParts = kPerRow < 4 ? kPerRow : 4;  // threads per key
  static constexpr int kChunks = kPerRow / kParts;          // vectors per thread
  static constexpr int kThreads = kDecodeKeys * kParts;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kQ = 0;                                 // float [kDecodeMaxG][D]
  static constexpr int kP = kQ + kDecodeMaxG * D;              // float [kDecodeMaxG][keys]
  static constexpr int kRed = kP + kDecodeMaxG * kDecodeKeys;  // float [warps][kDecodeMaxG]
  static constexpr int kStat = kRed + kWarps * kDecodeMaxG;    // float [3][kDecodeMaxG] m l a
  static constexpr int kFloats = (kStat + 3 * kDecodeMaxG + 3) / 4 * 4;
  static constexpr size_t kVBytes = size_t(kDecodeKeys) * D * sizeof(KV);  // V rows, raw
  static constexpr size_t kBytes = size_t(kFloats) * 4 + kVBytes;
};

template <class T, class KV, int D>
__global__ void __launch_bounds__(DecodeCfg<KV, D>::kThreads)
    paged_attention_decode_kernel(AttentionArgs a) {
  using C = DecodeCfg<KV, D>;
  constexpr int kVec = C::kVec, kParts = C::kParts, kChunks = C::kChunks;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  float* q_s = smem + C::kQ;
  float* p_s = smem + C::kP;
  float* red = smem + C::kRed;
  float* m_s = smem + C::kStat;
  float* l_s = m_s + kDecodeMaxG;
  float* a_s = l_s + kDecodeMaxG;
  KV* v_s = reinterpret_cast<KV*>(smem + C::kFloats);  // [kDecodeKeys][D]
  pdl_trigger();

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kk = tid / kParts, part = tid % kParts;  // key of the pass, share of its row
  const int tile = blockIdx.x, hkv = blockIdx.y, split = blockIdx.z;
  const int seq = a.tiles[tile * 3];
  const int G = a.heads / a.kv_heads;
  const int kvl = a.kv_len[seq];
  const int total = kvl + 1;
  const int per = split_keys(total, a.num_splits, true);
  const int k_begin = split * per;
  const int k_end = min(total, k_begin + per);
  if (k_begin >= k_end) return;
  const size_t blk = (size_t(tile) * a.kv_heads + hkv) * a.num_splits + split;

  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);
  const int32_t* bt = a.block_tables + size_t(seq) * a.bt_stride;
  const size_t kv_row = size_t(a.kv_heads) * D;
  uint4 kr[kChunks], vr[kChunks];  // vectors part + c * kParts of the row
  auto fetch = [&](int t0, bool with_new) {
    const int key = t0 + kk;
    if (key < k_end && (with_new || key != kvl)) {
      const int phys = bt[key / a.block_size];
      const size_t off =
          (size_t(phys) * a.block_size + key % a.block_size) * kv_row + size_t(hkv) * D;
      const uint4* kp = reinterpret_cast<const uint4*>(kc + off);
      const uint4* vp = reinterpret_cast<const uint4*>(vc + off);
#pragma unroll
      for (int c = 0; c < kChunks; c++) kr[c] = kp[part + c * kParts];
#pragma unroll
      for (int c = 0; c < kChunks; c++) vr[c] = vp[part + c * kParts];
    }
  };
  // The cached keys do not depend on the kernels before this one: stream them while those
  // finish; only the new key (index kv_len) waits.
  fetch(k_begin, false);
  pdl_wait();

  const int slot = a.slot_start[seq];
  const int q_stride = (a.heads + 2 * a.kv_heads) * D;
  const float k_scale = kv_scale_of(a.kv_scale, a.kv_heads, hkv, false);
  const float v_scale = kv_scale_of(a.kv_scale, a.kv_heads, hkv, true);
  const float scale = rsqrtf(float(D)) * k_scale;
  const T* qkv_row = static_cast<const T*>(a.qkv) + size_t(slot) * q_stride;
  const T* qkv = qkv_row + size_t(hkv) * G * D;
  const bool has_new = k_begin <= kvl && kvl < k_end;  // this block holds the new key
  if (a.fuse_rope) {
    // RoPE here instead of in rope_kv_write (same math): q of the G heads into q_s; the new
    // key's k (rotated) and v go to the cache and, through v_s, to the thread that owns it.
    const float pos = float(a.positions[slot]);
    constexpr int kHalf = D / 2;
    for (int i = tid; i < G * kHalf; i += C::kThreads) {
      const int g = i / kHalf, j = i % kHalf;
      const float x0 = to_f32(qkv[g * D + j]), x1 = to_f32(qkv[g * D + j + kHalf]);
      float y0, y1;
      rope_pair(x0, x1, pos, a.inv_freq[j], y0, y1);
      q_s[g * D + j] = round_to<T>(y0) * scale;
      q_s[g * D + j + kHalf] = round_to<T>(y1) * scale;
    }
    if (has_new) {
      KV* kn = v_s;  // scratch: the new k row, then the new v row (v_s is filled later)
      KV* vn = v_s + D;
      const T* kq = qkv_row + size_t(a.heads + hkv) * D;
      const T* vq = qkv_row + size_t(a.heads + a.kv_heads + hkv) * D;
      const size_t dst = size_t(a.cache_slot[slot]) * kv_row + size_t(hkv) * D;
      KV* kw = static_cast<KV*>(const_cast<void*>(a.k_cache)) + dst;  // this layer's cache
      KV* vw = static_cast<KV*>(const_cast<void*>(a.v_cache)) + dst;
      const float k_inv = 1.0f / k_scale, v_inv = 1.0f / v_scale;
      for (int j = tid; j < kHalf; j += C::kThreads) {
        const float x0 = to_f32(kq[j]), x1 = to_f32(kq[j + kHalf]);
        float r0, r1;
        rope_pair(x0, x1, pos, a.inv_freq[j], r0, r1);
        const KV y0 = kv_from_f32<KV>(round_to<T>(r0), k_inv);
        const KV y1 = kv_from_f32<KV>(round_to<T>(r1), k_inv);
        kn[j] = y0;
        kn[j + kHalf] = y1;
        kw[j] = y0;
        kw[j + kHalf] = y1;
      }
      for (int j = tid; j < D; j += C::kThreads) {
        const KV y = kv_from_f32<KV>(to_f32(vq[j]), v_inv);
        vn[j] = y;
        vw[j] = y;
      }
      __syncthreads();
      if (k_begin + kk == kvl) {
#pragma unroll
        for (int c = 0; c < kChunks; c++) {
          kr[c] = reinterpret_cast<const uint4*>(kn)[part + c * kParts];
          vr[c] = reinterpret_cast<const uint4*>(vn)[part + c * kParts];
        }
      }
    }
  } else {
    if (k_begin + kk == kvl) fetch(k_begin, true);
    for (int i = tid; i < G * D; i += C::kThreads) q_s[i] = to_f32(qkv[i]) * scale;
  }
  if (tid < kDecodeMaxG) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }

  constexpr int kOut = (kDecodeMaxG * D + C::kThreads - 1) / C::kThreads;  // (head, dim) each
  float acc[kOut];
#pragma unroll
  for (int i = 0; i < kOut; i++) acc[i] = 0.0f;
  const float4* q4 = reinterpret_cast<const float4*>(q_s);

  for (int t0 = k_begin; t0 < k_end; t0 += kDecodeKeys) {
    __syncthreads();  // q_s / stats ready; previous pass's p_s and v_s consumed
    const bool valid = t0 + kk < k_end;
    float sc[kDecodeMaxG];
#pragma unroll
    for (int g = 0; g < kDecodeMaxG; g++) sc[g] = 0.0f;
    uint4* vdst = reinterpret_cast<uint4*>(v_s + size_t(kk) * D);
#pragma unroll
    for (int c = 0; c < kChunks; c++) {
      const int vec = part + c * kParts;
      vdst[vec] = valid ? vr[c] : make_uint4(0, 0, 0, 0);
      if (!valid) continue;
      const KV* e = reinterpret_cast<const KV*>(&kr[c]);
      float kf[kVec];
#pragma unroll
      for (int v = 0; v < kVec; v++) kf[v] = to_f32(e[v]);
#pragma unroll
      for (int g = 0; g < kDecodeMaxG; g++) {
        if (g < G) {
#pragma unroll
          for (int v4 = 0; v4 < kVec / 4; v4++) {
            const float4 q = q4[(g * D + vec * kVec) / 4 + v4];
            sc[g] += q.x * kf[4 * v4] + q.y * kf[4 * v4 + 1] + q.z * kf[4 * v4 + 2] +
                     q.w * kf[4 * v4 + 3];
          }
        }
      }
    }
    if (t0 + kDecodeKeys < k_end) fetch(t0 + kDecodeKeys, true);  // next pass in flight
      // Sum the kParts partial dots (neighbouring lanes); every part then holds the scores.
#pragma unroll
    for (int g = 0; g < kDecodeMaxG; g++) {
#pragma unroll
      for (int o = 1; o < kParts; o <<= 1) sc[g] += __shfl_xor_sync(0xffffffffu, sc[g], o);
      if (!valid || g >= G) sc[g] = -INFINITY;
    }
#pragma unroll
    for (int g = 0; g < kDecodeMaxG; g++) {
      const float mx = warp_max(sc[g]);
      if (lane == 0) red[warp * kDecodeMaxG + g] = mx;
    }
    __syncthreads();
    float mnew[kDecodeMaxG];
#pragma unroll
    for (int g = 0; g < kDecodeMaxG; g++) {
      float mx = m_s[g];
#pragma unroll
      for (int w = 0; w < C::kWarps; w++) mx = fmaxf(mx, red[w * kDecodeMaxG + g]);
      mnew[g] = mx;
    }
    __syncthreads();  // everyone has read red before it holds sums
#pragma unroll
    for (int g = 0; g < kDecodeMaxG; g++) {
      const float p = (g < G && mnew[g] != -INFINITY) ? expf(sc[g] - mnew[g]) : 0.0f;
      if (part == 0) p_s[g * kDecodeKeys + kk] = p;
      const float sum = warp_sum(part == 0 ? p : 0.0f);
      if (lane == 0) red[warp * kDecodeMaxG + g] = sum;
    }
    __syncthreads();
    if (tid < kDecodeMaxG) {
      const int g = tid;
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < C::kWarps; w++) sum += red[w * kDecodeMaxG + g];
      const float alpha = mnew[g] == -INFINITY ? 1.0f : expf(m_s[g] - mnew[g]);
      l_s[g] = l_s[g] * alpha + sum;
      m_s[g] = mnew[g];
      a_s[g] = alpha;
    }
    __syncthreads();
    const int n_keys = min(kDecodeKeys, k_end - t0);
#pragma unroll
    for (int i = 0; i < kOut; i++) {
      const int o = tid + i * C::kThreads;
      const int g = o / D, d = o % D;
      if (g < G) {
        float v = acc[i] * a_s[g];
        const float* p = p_s + g * kDecodeKeys;
#pragma unroll 8
        for (int j = 0; j < n_keys; j++) v += p[j] * to_f32(v_s[size_t(j) * D + d]);
        acc[i] = v;
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kOut; i++) acc[i] *= v_scale;

  const bool single = (total + per - 1) / per == 1;
#pragma unroll
  for (int i = 0; i < kOut; i++) {
    const int o = tid + i * C::kThreads;
    const int g = o / D, d = o % D;
    if (g >= G) continue;
    if (single)
      static_cast<T*>(a.out)[size_t(slot) * a.heads * D + (size_t(hkv) * G + g) * D + d] =
          from_f32<T>(acc[i] / l_s[g]);
    else
      a.partial_o[(blk * kAttnRows + g) * D + d] = acc[i];
  }
  if (!single && tid < G) {
    a.partial_ml[(blk * kAttnRows + tid) * 2] = m_s[tid];
    a.partial_ml[(blk * kAttnRows + tid) * 2 + 1] = l_s[tid];
  }
}

// Merges the active splits of one (tile, kv head, row): out = Σ_s o_s w_s, w_s = e^(m_s - M)
// / Σ_s l_s e^(m_s - M). One block per row: warp 0 computes the split weights (lanes over
// splits), then the threads sum over the splits in kCombineThreads / head_dim interleaved
// groups (several loads in flight per thread) and reduce the groups in shared memory.
constexpr int kCombineThreads = 256;

template <class T>
__global__ void __launch_bounds__(kCombineThreads) attention_combine_kernel(AttentionArgs a) {
  __shared__ float w_s[kMaxSplits];
  __shared__ float part[kCombineThreads];
  pdl_trigger();
  pdl_wait();
  const int tile = blockIdx.x, hkv = blockIdx.y, r = blockIdx.z;
  const int D = a.head_dim;
  const int seq = a.tiles[tile * 3], j0 = a.tiles[tile * 3 + 1], nj = a.tiles[tile * 3 + 2];
  const int G = a.heads / a.kv_heads;
  if (r >= nj * G) return;
  const int total = a.kv_len[seq] + j0 + nj;
  const int per = split_keys(total, a.num_splits, a.decode);
  const int n_active = (total + per - 1) / per;
  if (n_active <= 1) return;  // the attention kernel wrote the output itself
  const size_t blk0 = (size_t(tile) * a.kv_heads + hkv) * a.num_splits;
  const int tid = threadIdx.x;
  if (tid < 32) {
    float m = -INFINITY;
    for (int s = tid; s < n_active; s += 32)
      m = fmaxf(m, a.partial_ml[((blk0 + s) * kAttnRows + r) * 2]);
    m = warp_max(m);
    float l = 0.0f;
    for (int s = tid; s < n_active; s += 32) {
      const float ms = a.partial_ml[((blk0 + s) * kAttnRows + r) * 2];
      const float e = ms == -INFINITY ? 0.0f : expf(ms - m);
      w_s[s] = e;
      l += a.partial_ml[((blk0 + s) * kAttnRows + r) * 2 + 1] * e;
    }
    l = warp_sum(l);
    __syncwarp();
    for (int s = tid; s < n_active; s += 32) w_s[s] /= l;
  }
  __syncthreads();
  const int groups = kCombineThreads / D;  // head_dim divides kCombineThreads (16, 64, 128)
  const int d = tid % D, grp = tid / D;
  float o = 0.0f;
#pragma unroll 4
  for (int s = grp; s < n_active; s += groups)
    o += a.partial_o[((blk0 + s) * kAttnRows + r) * D + d] * w_s[s];
  part[tid] = o;
  __syncthreads();
  if (grp == 0) {
    for (int g2 = 1; g2 < groups; g2++) o += part[g2 * D + d];
    const int slot = a.slot_start[seq] + j0 + r / G, head = hkv * G + r % G;
    static_cast<T*>(a.out)[size_t(slot) * a.heads * D + head * D + d] = from_f32<T>(o);
  }
}

template <class T, class KV, int D>
static Status launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  const bool decode = a.decode;
  const size_t bytes = decode ? DecodeCfg<KV, D>::kBytes : AttnSmem<D>::kBytes;
  auto* kernel =
      decode ? paged_attention_decode_kernel<T, KV, D> : paged_attention_kernel<T, KV, D>;
  static bool configured[2] = {false, false};  // dynamic shared memory limit, once per variant
  if (!configured[decode]) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (e != cudaSuccess)
      return Status::bad(cat("paged_attention: cudaFuncSetAttribute: ", cudaGetErrorString(e)));
    configured[decode] = true;
  }
  const dim3 grid(a.n_tiles, a.kv_heads, a.num_splits);
  cudaError_t e = launch_kernel(kernel, grid, decode ? DecodeCfg<KV, D>::kThreads : kAttnThreads,
                                bytes, stream, a.pdl, a);
  if (e != cudaSuccess) return Status::bad(cat("paged_attention: launch: ", cudaGetErrorString(e)));
  Status st = launch_status(decode ? "paged_attention_decode" : "paged_attention");
  if (!st.ok || a.num_splits == 1) return st;  // one split: no combine needed
  e = launch_kernel(attention_combine_kernel<T>, dim3(a.n_tiles, a.kv_heads, kAttnRows),
                    kCombineThreads, 0, stream, a.pdl, a);
  if (e != cudaSuccess)
    return Status::bad(cat("attention_combine: launch: ", cudaGetErrorString(e)));
  return launch_status("attention_combine");
}

template <class T, class KV>
static Status dispatch_head_dim(const AttentionArgs& a, cudaStream_t stream) {
  switch (a.head_dim) {
    case 16:
      return launch_attention<T, KV, 16>(a, stream);
    case 64:
      return launch_attention<T, KV, 64>(a, stream);
    case 128:
      return launch_attention<T, KV, 128>(a, stream);
    default:
      return Status::bad(cat("paged_attention: head_dim ", a.head_dim, " (built for 16, 64, 128)"));
  }
}

Status paged_attention(const AttentionArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads == 0,
                 "paged_attention: heads ", a.heads, " not a multiple of kv_heads ", a.kv_heads);
  LOOM_ARG_CHECK(a.heads / a.kv_heads <= kAttnRows, "paged_attention: GQA ratio ",
                 a.heads / a.kv_heads, " (at most ", kAttnRows, ")");
  LOOM_ARG_CHECK(a.block_size > 0 && a.bt_stride > 0 && a.num_splits >= 1 &&
                     a.num_splits <= kMaxSplits && a.n_tiles >= 0,
                 "paged_attention: block_size ", a.block_size, ", bt_stride ", a.bt_stride,
                 ", num_splits ", a.num_splits);
  LOOM_ARG_CHECK(a.qkv && a.k_cache && a.v_cache && a.block_tables && a.kv_len && a.slot_start &&
                     a.tiles && a.out,
                 "paged_attention: null pointer");
  LOOM_ARG_CHECK(!a.fuse_rope || (a.decode && a.positions && a.cache_slot && a.inv_freq),
                 "paged_attention: fuse_rope needs decode and positions, cache_slot, inv_freq");
  if (a.mma && attention_mma_supported(a.t, a.heads, a.kv_heads, a.head_dim))
    return paged_attention_mma(a, stream);  // attention_mma.cu
  LOOM_ARG_CHECK(a.partial_ml != nullptr && (a.num_splits == 1 || a.partial_o != nullptr),
                 "paged_attention: no partial workspace");
  LOOM_ARG_CHECK(!a.decode || a.heads / a.kv_heads <= kDecodeMaxG, "paged_attention: decode ",
                 "kernel takes a GQA ratio up to ", kDecodeMaxG, ", found ", a.heads / a.kv_heads);
  if (a.n_tiles == 0) return Status::good();
  return dispatch_kv(a.t, a.kv_fp8, "paged_attention", [&](auto t, auto kv) {
    return dispatch_head_dim<decltype(t), decltype(kv)>(a, stream);
  });
}

}  // namespace loom::gpu
