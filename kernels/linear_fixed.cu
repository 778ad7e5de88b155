#include <algorithm>

#include "kernels/common.cuh"
#include "kernels/linear_fixed.cuh"

namespace loom::gpu {

// A block is 8 warps; warp w computes segment r0 + w of each round of 8 segments for the
// block's whole tile (16·RT weight rows × 8·NT tokens), then the block adds the round's
// segment results to its running sums in segment order through shared memory.
constexpr int kLfWarps = 8;
constexpr int kLfThreads = 32 * kLfWarps;
constexpr int kLfChunk = 32;                          // k per lane load step (two mmas)
constexpr int kLfChunks = kLinearSegment / kLfChunk;  // 8 chunks a segment
constexpr int kLfVecsPerSeg = kLinearSegment / 8;     // 16-byte vectors per row segment
static_assert(kLinearSegment % kLfChunk == 0, "segment must be whole 32-wide chunks");

// Predicated 16-byte loads that give zeros where `ok` is false, without a branch (a branch
// per load keeps the loads of a chunk group from being issued back to back). Weights are read
// once per step: no L1 allocation, 256-byte L2 prefetch (as the GEMV). Activations are re-read
// by every row tile: default caching.
__device__ __forceinline__ uint4 lf_load_weights(const uint4* p, bool ok) {
  uint4 v;
  // volatile: kept before pdl_wait (also volatile), so the weights stream during the wait.
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
      " mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
      " @p ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
      : "=&r"(v.x), "=&r"(v.y), "=&r"(v.z), "=&r"(v.w)
      : "l"(p), "r"(int(ok)));
  return v;
}
__device__ __forceinline__ uint4 lf_load_x(const uint4* p, bool ok) {
  uint4 v;
  // Not .nc: under programmatic dependent launch the previous kernel may still be writing x
  // while this one runs (before pdl_wait). "memory": never hoisted above pdl_wait.
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
      " mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
      " @p ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
      : "=&r"(v.x), "=&r"(v.y), "=&r"(v.z), "=&r"(v.w)
      : "l"(p), "r"(int(ok))
      : "memory");
  return v;
}

// Segment s of the block's tile, from zero, in groups of kGroup chunks. Chunk c covers k
// [256 s + 32 c, +32): lane (g, t) holds k 8t..8t+7 of the chunk (one 16-byte vector) for
// weight rows g and g+8 of each row tile and for token g of each token tile. mma #0 takes
// elements 0-3 of the vectors (k slots 2t, 2t+1 ← 8t, 8t+1 and 2t+8, 2t+9 ← 8t+2, 8t+3),
// mma #1 elements 4-7: the same permutation of k for A and B. Order of one output's k-steps:
// chunk 0 mma #0, #1, chunk 1 … — whatever the tile, the group size or the load timing.
template <int RT>
struct WeightGroup {
  // Chunks whose weights load before use: the whole segment for one row tile (decode: as
  // many bytes in flight as possible), 2 chunks for two (registers go to the accumulators).
  static constexpr int kGroup = RT == 1 ? kLfChunks : 2;
  uint4 v[kGroup][RT][2];  // [chunk][row tile][rows g, g + 8]
};

// Issues the weight loads of group c0 / kGroup of segment s (all in flight before any use).
template <int RT>
__device__ __forceinline__ void load_weight_group(const LinearFixedArgs& a, int s, int c0, int n0,
                                                  int g, int t, WeightGroup<RT>& wf) {
  const int k8 = a.k >> 3;
  const uint4* w4 = static_cast<const uint4*>(a.w);
#pragma unroll
  for (int c = 0; c < WeightGroup<RT>::kGroup; c++) {
    const int v = s * kLfVecsPerSeg + (c0 + c) * 4 + t;
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = n0 + rt * 16 + g + 8 * h;
        wf.v[c][rt][h] = lf_load_weights(w4 + size_t(row) * k8 + v, row < a.n && v < k8);
      }
  }
}

// acc += the group's k-steps: activation loads, then two mmas per chunk, tile and token tile.
template <int RT, int NT>
__device__ __forceinline__ void mma_weight_group(const LinearFixedArgs& a, int s, int c0, int m0,
                                                 int g, int t, const WeightGroup<RT>& wf,
                                                 float (&acc)[RT][NT][4]) {
  const int k8 = a.k >> 3;
  const uint4* x4 = static_cast<const uint4*>(a.x);
#pragma unroll
  for (int c = 0; c < WeightGroup<RT>::kGroup; c++) {
    const int v = s * kLfVecsPerSeg + (c0 + c) * 4 + t;
    uint4 xf[NT];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
      const int tok = m0 + nt * 8 + g;
      xf[nt] = lf_load_x(x4 + size_t(tok) * k8 + v, tok < a.m && v < k8);
    }
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        const uint4& lo = wf.v[c][rt][0];  // row g
        const uint4& hi = wf.v[c][rt][1];  // row g + 8
        mma_bf16(acc[rt][nt], lo.x, hi.x, lo.y, hi.y, xf[nt].x, xf[nt].y);
        mma_bf16(acc[rt][nt], lo.z, hi.z, lo.w, hi.w, xf[nt].z, xf[nt].w);
      }
  }
}

// A warp's mma accumulators [row tiles][token tiles][4], zeroed for a new segment.
template <int RT, int NT>
__device__ __forceinline__ void zero_tiles(float (&acc)[RT][NT][4]) {
#pragma unroll
  for (int rt = 0; rt < RT; rt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[rt][nt][i] = 0.0f;
}

template <class T>
__device__ __forceinline__ void lf_store(T* y, float v);
template <>
__device__ __forceinline__ void lf_store<float>(float* y, float v) {
  *y = v;
}
template <>
__device__ __forceinline__ void lf_store<bf16>(bf16* y, float v) {
  *y = __float2bfloat16_rn(v);
}

// Block b: token tile b % m_tiles, row tile b / m_tiles (blocks that share weight rows run
// next to each other, so a weight tile read for several token tiles comes from L2).
template <int RT, int NT, class OutT>
__global__ void __launch_bounds__(kLfThreads) linear_fixed_kernel(LinearFixedArgs a, int m_tiles) {
  constexpr int kRows = 16 * RT, kToks = 8 * NT, kTile = kRows * kToks;
  constexpr int kPer = (kTile + kLfThreads - 1) / kLfThreads;
  extern __shared__ float lf_part[];  // [kLfWarps][kToks][kRows] one round's segment results
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int m0 = int(blockIdx.x % unsigned(m_tiles)) * kToks;
  const int n0 = int(blockIdx.x / unsigned(m_tiles)) * kRows;
  const int nseg = (a.k + kLinearSegment - 1) / kLinearSegment;

  float tot[kPer];  // running sums of tile elements threadIdx.x + i · kLfThreads
#pragma unroll
  for (int i = 0; i < kPer; i++) tot[i] = 0.0f;
  // The first weights stream before the wait for the previous kernel (programmatic dependent
  // launch: weights do not depend on it; activations and y do).
  WeightGroup<RT> wf;
  if (warp < nseg) load_weight_group<RT>(a, warp, 0, n0, g, t, wf);
  pdl_wait();
  for (int r0 = 0; r0 < nseg; r0 += kLfWarps) {
    const int s = r0 + warp;
    if (s < nseg) {
      float acc[RT][NT][4];
      zero_tiles(acc);
#pragma unroll
      for (int c0 = 0; c0 < kLfChunks; c0 += WeightGroup<RT>::kGroup) {
        if (c0 > 0 || (RT > 1 && r0 > 0)) load_weight_group<RT>(a, s, c0, n0, g, t, wf);
        mma_weight_group<RT, NT>(a, s, c0, m0, g, t, wf, acc);
      }
      float* p = lf_part + warp * kTile;
#pragma unroll
      for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
          for (int i = 0; i < 4; i++) {
            const int row = rt * 16 + g + 8 * (i >> 1);
            const int tok = nt * 8 + 2 * t + (i & 1);
            p[tok * kRows + row] = acc[rt][nt][i];
          }
      // Small tiles (decode): prefetch the next round's first group across the barriers. The
      // large tile has no registers to spare for it.
      if (RT == 1 && s + kLfWarps < nseg) load_weight_group<RT>(a, s + kLfWarps, 0, n0, g, t, wf);
    }
    __syncthreads();
    const int n_here = min(kLfWarps, nseg - r0);
#pragma unroll
    for (int i = 0; i < kPer; i++) {
      const int e = threadIdx.x + i * kLfThreads;
      if (e < kTile)
        for (int w = 0; w < n_here; w++) tot[i] = __fadd_rn(tot[i], lf_part[w * kTile + e]);
    }
    __syncthreads();  // the next round overwrites lf_part
  }

  OutT* y = static_cast<OutT*>(a.y);
#pragma unroll
  for (int i = 0; i < kPer; i++) {
    const int e = threadIdx.x + i * kLfThreads;
    const int tok = e / kRows, row = e % kRows;
    if (e < kTile && m0 + tok < a.m && n0 + row < a.n)
      lf_store(y + size_t(m0 + tok) * a.ldy + (n0 + row), tot[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Tiled path (m past decode sizes): the register path above re-reads every token row from L2
// for each 16-row weight tile and keeps its mmas waiting on global loads; here a block stages a
// weight tile and a token tile in shared memory and every fragment comes from there.
//
// A block computes kRows weight rows × kToks tokens with WN × WM warps of 16·RT rows × 8·NT
// tokens. k advances in steps of 64 (two 32-wide chunks). Step i's slice of both tiles lands in
// ring slot i % 4 by cp.async (16-byte copies, zeros past n, m and k), 3 steps ahead of its
// mmas; 4 steps are one segment, so slot j holds the segment's j-th step.
//
// Slot layout [chunk 2][kRows weight rows, then kToks token rows][32 bf16]: 64 bytes per row
// and chunk. Lane (g, t) reads its 16 bytes (k 8t..8t+7 of the chunk) of rows g, g + 8 and of
// token g with one ld.shared.v4 each: the very vectors the register path loads from global
// memory, fed to the same two mmas in the same order (chunk 0 mma #0, #1, chunk 1 …, from a
// zero accumulator each segment; whole segments, zero-filled past k, as there). The segment's
// result is then added to the running sum with __fadd_rn, segment after segment from +0. So
// every output sees the register path's arithmetic exactly; only who computes it changes.
// Banks: 16-byte loads are served 8 lanes at a time, lanes 8q..8q+7 = rows 2p, 2p+1 × vectors
// 0-3 = 128 contiguous bytes, each bank once.
constexpr int kLtStepK = 2 * kLfChunk;                // k per pipeline step
constexpr int kLtSlots = kLinearSegment / kLtStepK;   // ring slots = steps per segment (4)
constexpr int kLtRowBytes = kLfChunk * sizeof(bf16);  // one row's bytes of one chunk (64)
static_assert(kLtSlots == 4, "the ring is one segment deep");

template <int WN, int WM, int RT, int NT>
struct TileShape {
  static constexpr int kWarps = WN * WM, kThreads = 32 * kWarps;
  static constexpr int kRows = WN * RT * 16, kToks = WM * NT * 8;
  static constexpr int kSlotRows = kRows + kToks;
  static constexpr int kChunkBytes = kSlotRows * kLtRowBytes;  // one chunk of every row
  static constexpr int kSlotBytes = 2 * kChunkBytes;
  static constexpr int kRingBytes = kLtSlots * kSlotBytes;
  // Output staging [kToks][kOutLd] fp32 (after the ring is drained): 4 words of padding put
  // the 4 token pairs of a fragment store 8 banks apart.
  static constexpr int kOutLd = kRows + 4;
  static constexpr int kOutBytes = kToks * kOutLd * 4;
  static constexpr int kSmem = kRingBytes > kOutBytes ? kRingBytes : kOutBytes;
  // Copies: thread bits [1:0] vector, [2] row of a row pair, [3] chunk, above: row pair, so 8
  // consecutive threads fill 128 contiguous bytes of a slot. A pass of the block covers
  // kCopyRows rows; kCopies passes (16-byte copies per thread) fill a slot.
  static constexpr int kCopyRows = kThreads / 8;
  static constexpr int kCopies = kSlotRows / kCopyRows;
  static constexpr int kWeightCopies = kRows / kCopyRows;
  static_assert(kRows % kCopyRows == 0 && kToks % kCopyRows == 0, "copy passes split the tiles");
  static_assert(kCopies <= 32, "validity mask is 32 bits");
};

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool ok) {
  // src-size 0: nothing is read, the 16 bytes become zeros.
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(ok ? 16 : 0)
               : "memory");
}

// Block b: token tile b % m_tiles, row tile b / m_tiles (as the register path: the blocks that
// share a weight tile run together and read it once from DRAM).
template <int WN, int WM, int RT, int NT, int kMinBlocks, class OutT>
__global__ void __launch_bounds__(32 * WN * WM, kMinBlocks)
    linear_fixed_tiled_kernel(LinearFixedArgs a, int m_tiles) {
  using S = TileShape<WN, WM, RT, NT>;
  extern __shared__ __align__(16) unsigned char lt_smem[];  // ring, then output staging
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wn = warp % WN, wm = warp / WN;
  const int m0 = int(blockIdx.x % unsigned(m_tiles)) * S::kToks;
  const int n0 = int(blockIdx.x / unsigned(m_tiles)) * S::kRows;
  const int nseg = (a.k + kLinearSegment - 1) / kLinearSegment;
  const int steps = nseg * kLtSlots;
  const bf16* w = static_cast<const bf16*>(a.w) + size_t(n0) * a.k;  // [kRows, k] of the tile
  const bf16* x = static_cast<const bf16*>(a.x) + size_t(m0) * a.k;  // [kToks, k]
  const uint32_t ring = uint32_t(__cvta_generic_to_shared(lt_smem));

  // This thread's copies: slot rows r0 + i·kCopyRows, chunk cc, vector cv (k cc·32 + cv·8 of
  // a step). Rows past n (weights) or m (tokens) are zero-filled, bit i of row_ok clear.
  const int cv = tid & 3, cc = (tid >> 3) & 1;
  const int r0 = ((tid >> 4) << 1) | ((tid >> 2) & 1);
  const int k_copy = cc * kLfChunk + cv * 8;
  const uint32_t copy_dst = ring + cc * S::kChunkBytes + r0 * kLtRowBytes + cv * 16;
  uint32_t row_ok = 0;
#pragma unroll
  for (int i = 0; i < S::kCopies; i++) {
    const int r = r0 + i * S::kCopyRows;
    const bool ok = i < S::kWeightCopies ? n0 + r < a.n : m0 + r - S::kRows < a.m;
    row_ok |= uint32_t(ok) << i;
  }
  auto issue = [&](int step, int slot, bool weights, bool tokens) {
    const int kk = step * kLtStepK + k_copy;
    const bool k_ok = kk < a.k;
#pragma unroll
    for (int i = 0; i < S::kCopies; i++) {
      const bool is_w = i < S::kWeightCopies;
      if (is_w ? !weights : !tokens) continue;
      const int r = r0 + i * S::kCopyRows;  // slot row
      const bool ok = k_ok && ((row_ok >> i) & 1u);
      const bf16* src = is_w ? w + size_t(r) * a.k + kk : x + size_t(r - S::kRows) * a.k + kk;
      cp_async16(copy_dst + slot * S::kSlotBytes + i * S::kCopyRows * kLtRowBytes, ok ? src : a.w,
                 ok);
    }
  };

  float tot[RT][NT][4];  // running sums over the segments done
#pragma unroll
  for (int rt = 0; rt < RT; rt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) tot[rt][nt][i] = 0.0f;

  // Prologue: steps 0-2 (there are ≥ 4); weights before the wait for the previous kernel
  // (programmatic dependent launch), tokens after. One commit group per step.
  for (int s = 0; s < kLtSlots - 1; s++) issue(s, s, true, false);
  pdl_wait();
  for (int s = 0; s < kLtSlots - 1; s++) {
    issue(s, s, false, true);
    cp_async_commit();
  }

  // Fragment addresses (bytes into a chunk of a slot): rows g (+8 h) of the warp's 16-row
  // tiles, token g of its 8-token tiles, this lane's vector t.
  const int a_off = (wn * RT * 16 + g) * kLtRowBytes + t * 16;
  const int b_off = (S::kRows + wm * NT * 8 + g) * kLtRowBytes + t * 16;
  for (int seg = 0; seg < nseg; seg++) {
    float acc[RT][NT][4];
    zero_tiles(acc);
#pragma unroll
    for (int j = 0; j < kLtSlots; j++) {
      const int step = seg * kLtSlots + j;
      // Groups committed so far: 3 + step; ≤ 2 pending = step's group landed (this thread's
      // copies), the barrier makes it every thread's and frees slot (j + 3) % 4, read at
      // step - 1 by every warp.
      cp_async_wait<kLtSlots - 2>();
      __syncthreads();
      if (step + kLtSlots - 1 < steps)
        issue(step + kLtSlots - 1, (j + kLtSlots - 1) % kLtSlots, true, true);
      cp_async_commit();  // possibly empty: keeps the count above
#pragma unroll
      for (int c = 0; c < 2; c++) {
        const unsigned char* base = lt_smem + j * S::kSlotBytes + c * S::kChunkBytes;
        uint4 af[RT][2], bfr[NT];
#pragma unroll
        for (int rt = 0; rt < RT; rt++)
#pragma unroll
          for (int h = 0; h < 2; h++)
            af[rt][h] =
                *reinterpret_cast<const uint4*>(base + a_off + (rt * 16 + 8 * h) * kLtRowBytes);
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
          bfr[nt] = *reinterpret_cast<const uint4*>(base + b_off + nt * 8 * kLtRowBytes);
#pragma unroll
        for (int rt = 0; rt < RT; rt++)
#pragma unroll
          for (int nt = 0; nt < NT; nt++) {
            const uint4& lo = af[rt][0];  // row g
            const uint4& hi = af[rt][1];  // row g + 8
            mma_bf16(acc[rt][nt], lo.x, hi.x, lo.y, hi.y, bfr[nt].x, bfr[nt].y);
            mma_bf16(acc[rt][nt], lo.z, hi.z, lo.w, hi.w, bfr[nt].z, bfr[nt].w);
          }
      }
    }
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) tot[rt][nt][i] = __fadd_rn(tot[rt][nt][i], acc[rt][nt][i]);
  }

  // Stage the sums through shared memory so that each row of y is written by consecutive
  // threads (a fragment holds 2 tokens × 2 rows 8 apart).
  cp_async_wait<0>();
  __syncthreads();                                 // every warp is done with the ring
  float* out = reinterpret_cast<float*>(lt_smem);  // [kToks][kOutLd]
#pragma unroll
  for (int rt = 0; rt < RT; rt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int row = wn * RT * 16 + rt * 16 + g + 8 * (i >> 1);
        const int tok = wm * NT * 8 + nt * 8 + 2 * t + (i & 1);
        out[tok * S::kOutLd + row] = tot[rt][nt][i];
      }
  __syncthreads();
  OutT* y = static_cast<OutT*>(a.y);
  for (int e = tid; e < S::kToks * S::kRows; e += S::kThreads) {
    const int tok = e / S::kRows, row = e % S::kRows;
    if (m0 + tok < a.m && n0 + row < a.n)
      lf_store(y + size_t(m0 + tok) * a.ldy + (n0 + row), out[tok * S::kOutLd + row]);
  }
}

template <int WN, int WM, int RT, int NT, int kMinBlocks, class OutT>
static Status launch_linear_fixed_tiled(const LinearFixedArgs& a, cudaStream_t stream) {
  using S = TileShape<WN, WM, RT, NT>;
  auto* kernel = linear_fixed_tiled_kernel<WN, WM, RT, NT, kMinBlocks, OutT>;
  static bool configured = false;
  if (!configured) {
    // All of the unified L1 as shared memory: the copies bypass L1, and the 64-tile wants 3
    // blocks of 64 KB on an SM.
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared));
    if (e != cudaSuccess)
      return Status::bad(cat("linear_fixed: ", S::kSmem,
                             " bytes of shared memory refused (tiled): ", cudaGetErrorString(e)));
    configured = true;
  }
  const int m_tiles = ceil_div(a.m, S::kToks);
  const long long blocks = (long long)m_tiles * ceil_div(a.n, S::kRows);
  LOOM_ARG_CHECK(blocks <= 0x7fffffffLL, "linear_fixed: m ", a.m, " x n ", a.n,
                 " needs more than 2^31 blocks");
  const cudaError_t e = launch_kernel(kernel, dim3(unsigned(blocks)), dim3(S::kThreads),
                                      size_t(S::kSmem), stream, a.pdl, a, m_tiles);
  if (e != cudaSuccess)
    return Status::bad(cat("linear_fixed: tiled launch: ", cudaGetErrorString(e)));
  return launch_status("linear_fixed (tiled)");
}

template <int RT, int NT, class OutT>
static Status launch_linear_fixed(const LinearFixedArgs& a, cudaStream_t stream) {
  constexpr int kRows = 16 * RT, kToks = 8 * NT;
  constexpr size_t kSmem = size_t(kLfWarps) * kRows * kToks * sizeof(float);
  if constexpr (kSmem > 48 * 1024) {
    static bool configured = false;
    if (!configured) {
      const cudaError_t e =
          cudaFuncSetAttribute(linear_fixed_kernel<RT, NT, OutT>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem));
      if (e != cudaSuccess)
        return Status::bad(cat("linear_fixed: ", kSmem,
                               " bytes of shared memory refused: ", cudaGetErrorString(e)));
      configured = true;
    }
  }
  const int m_tiles = ceil_div(a.m, kToks);
  const long long blocks = (long long)m_tiles * ceil_div(a.n, kRows);
  LOOM_ARG_CHECK(blocks <= 0x7fffffffLL, "linear_fixed: m ", a.m, " x n ", a.n,
                 " needs more than 2^31 blocks");
  const cudaError_t e = launch_kernel(linear_fixed_kernel<RT, NT, OutT>, dim3(unsigned(blocks)),
                                      dim3(kLfThreads), kSmem, stream, a.pdl, a, m_tiles);
  if (e != cudaSuccess) return Status::bad(cat("linear_fixed: launch: ", cudaGetErrorString(e)));
  return launch_status("linear_fixed");
}

template <class OutT>
static Status dispatch_rows(const LinearFixedArgs& a, cudaStream_t stream) {
  // The tile only decides how fragments are shared, never the arithmetic of an output: any
  // choice by m is invariant. Small m: one token tile, weights streamed once at full width.
  if (a.m <= 8) return launch_linear_fixed<1, 1, OutT>(a, stream);
  if (a.m <= 16) return launch_linear_fixed<1, 2, OutT>(a, stream);
  if (a.m <= 32) return launch_linear_fixed<1, 4, OutT>(a, stream);
  if (a.m <= 64) return launch_linear_fixed<1, 8, OutT>(a, stream);
  return launch_linear_fixed<2, 8, OutT>(a, stream);
}

// Kernel by shape (any choice gives the same bits).
// Measured on an H200 (cuda_bench "linear_fixed paths", bench/results/
// 2026-11-22-h200-linear-fixed-paths.json): the register path wins up to 32 rows (not for the
// lm_head, whose 262k rows it would re-read the tokens for) and up to 128 rows where n <= 2048;
// the 192-row tiles win for gate_up (n 11264) at 256-512 rows; the 64-tiles everywhere else (at
// 1746 rows within 3% of the best tile on every Terra shape). The 128-tiles never won.
static int pick_path(int m, int n) {
  if (m <= 8 || (m <= 32 && n < 65536) || (m <= 128 && n <= 2048)) return kPathRows;
  if (n >= 8192 && n < 65536 && m >= 256 && m <= 512) return kPathTile192;
  return kPathTile64;
}

template <class OutT>
static Status dispatch_path(const LinearFixedArgs& a, cudaStream_t stream) {
  const int path = a.path == kPathAuto ? pick_path(a.m, a.n) : a.path;
  // Warps of RT 16-row × NT 8-token tiles hold 2·4·RT·NT fp32 (accumulators and running
  // sums): 64-tiles 2 × 2 warps of 32 × 32 (64 registers of sums), 128-tiles 2 × 4 warps of
  // 64 × 32 (128), 192-tiles 4 × 2 warps of 48 × 64 (192; 255 registers, no spills with nvcc
  // 13.0).
  if (path == kPathTile64) return launch_linear_fixed_tiled<2, 2, 2, 4, 3, OutT>(a, stream);
  if (path == kPathTile128) return launch_linear_fixed_tiled<2, 4, 4, 4, 1, OutT>(a, stream);
  if (path == kPathTile192) return launch_linear_fixed_tiled<4, 2, 3, 8, 1, OutT>(a, stream);
  return dispatch_rows<OutT>(a, stream);
}

Status linear_fixed(const LinearFixedArgs& a0, cudaStream_t stream) {
  LinearFixedArgs a = a0;
  if (a.ldy == 0) a.ldy = a.n;
  LOOM_ARG_CHECK(a.m >= 0 && a.n > 0 && a.k >= 8 && a.k % 8 == 0, "linear_fixed: m ", a.m, ", n ",
                 a.n, ", k ", a.k, " (expected m >= 0, n >= 1, k a positive multiple of 8)");
  LOOM_ARG_CHECK(a.ldy >= a.n, "linear_fixed: ldy ", a.ldy, " < n ", a.n);
  LOOM_ARG_CHECK(a.x && a.w && a.y, "linear_fixed: null x/w/y");
  LOOM_ARG_CHECK(a.x != a.y, "linear_fixed: y must not overwrite x");
  LOOM_ARG_CHECK(a.path >= kPathAuto && a.path <= kPathTile192, "linear_fixed: path ", a.path,
                 " (expected 0-4)");
  LOOM_ARG_CHECK(
      reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && reinterpret_cast<uintptr_t>(a.w) % 16 == 0,
      "linear_fixed: x and w must be 16-byte aligned");
  if (a.m == 0) return Status::good();
  return dispatch_f32_bf16(a.y_t, "linear_fixed (output)",
                           [&](auto tag) { return dispatch_path<decltype(tag)>(a, stream); });
}

}  // namespace loom::gpu
