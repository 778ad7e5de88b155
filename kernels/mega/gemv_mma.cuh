// The GEMV family on the tensor cores, at 4-8 slots in bf16 (MegaArgs::gemv_mma): what differs
// from the one-row-a-warp dot loop of gemv_ops.cuh. At batch 8 that loop unpacks 8 input rows
// for every weight chunk and its FMAs, not the weights' bytes, set the step (3.1 ms against the
// graph path's 1.6 on an H100, bench/NOTES-cuda.md session 57).
//
// Geometry. A unit's rows go in items of 16 (R a multiple of 16). Warp w takes the item's rows
// [8 (w / 8), +8) — its row group, gi = w / 8 — and the input columns [(w mod 8) kw, +kw),
// kw = k / 8 (its k part), in segments of at most 256 columns: 8 rows × 512 bytes, one ring slot
// (kGemvSegBytes). Every warp walks the same number of segments (nb = ceil(kw / 256)), so the
// ring's slots stay in step as in the dot loop.
//   A segment is one box of the weight's tensor map (megakernel.cuh, MegaTmaps): [chunk of 64
//   columns][row][64 columns], row i's 16-byte granule u of a chunk at u ^ i (the 128-byte
//   swizzle; the ring is 1,024-byte aligned), so the 8 row addresses of an ldmatrix fall on 8
//   distinct bank groups, without padding (shared memory at batch 8 has ~1 KB to spare). One
//   copy a segment: in 8-15 bulk copies of rows and their wrapped pieces, batch 8's streaming
//   alone took 500 us a step longer (bench/NOTES-cuda.md, session 60).
//   The staged input is kept in the A fragments' order (xs_word): per 32 columns and slot i, the
//   4 words lane (i, t) of an m16n8k16 needs for two k-steps side by side, one 16-byte load.
// Arithmetic. D[slot, row] = Σ_k x[slot, k] · w[row, k] by mma.sync m16n8k16 (A = the input,
// slots in rows 0-7 and zeros in 8-15; B = 8 weight rows; fp32 accumulate), the k-steps of a
// warp's part in increasing k; then the 8 parts of a row summed in part order (mma_item_out).
// So the bits depend on k and the hardware's mma, never on the SMs or the unit → SM map; they
// differ from the dot loop's (this is not the batch-invariant path).
#pragma once

#include "kernels/mega/sync.cuh"
#include "kernels/tma.cuh"

namespace loom::mega {

using loom::gpu::bf16;

constexpr int kMmaPartBytes = kMegaWarps * 64 * 4;  // each warp's D [8 slots, 8 rows] fp32

// The word (two bf16: columns c, c + 1, c even) of slot i's staged input in A-fragment order
// (instructions.h, mega_xs_word).
template <int M>
__device__ __forceinline__ uint32_t* xs_word(uint32_t* xs, int i, int c) {
  return xs + mega_xs_word(M, i, c);
}

// 16 bytes of shared memory as one ld.shared.v4 (LDS.128), for the megakernel's loops (here,
// gemv_ops.cuh's dot loop, attention's q·k): read through a reference or a struct copy, their
// 16-byte chunks compiled to four 32-bit loads, four lanes to a bank (NOTES-cuda.md, session 57).
__device__ __forceinline__ uint4 lds128(const void* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(loom::gpu::smem_u32(p)));
  return v;
}

__device__ __forceinline__ uint32_t pack2(bf16 lo, bf16 hi) {
  return uint32_t(__bfloat16_as_ushort(lo)) | uint32_t(__bfloat16_as_ushort(hi)) << 16;
}

__device__ __forceinline__ void mma_ldmatrix_x4(uint32_t (&r)[4], uint32_t s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}

// d += A · B for one k-step: A's rows 0-7 (a0: columns 2t, 2t + 1; a2: 2t + 8, 2t + 9 of row g),
// rows 8-15 zero; B = (b0, b1) of 8 weight rows.
__device__ __forceinline__ void mma_k16(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

// Lane 0 of `warp`: the copy of segment `it` of job j (a GemvJob) into `slot` (4 KB, 1,024-byte
// aligned), completing `bar`: one box of the weight's tensor map, or of its tail map for a short
// last segment. A row group's 8 rows are consecutive weight rows (mega_qkv_row, mega_gate_up_row:
// 8-row halves and groups); rows past the weight land as zeros, and the box's bytes all count.
template <class Job>
__device__ __forceinline__ void mma_issue_segment(const Job& j, int it, int warp, char* slot,
                                                  uint64_t* bar, uint64_t policy) {
  const int b = j.seg(it);
  const int kw = int(j.row_bytes) / 2 / kMmaKParts;
  const int chunks = min(kMmaSegCols, kw - b * kMmaSegCols) / 64;
  const int r0 = j.item_in_unit(it) * 16 + (warp / kMmaKParts) * 8;
  loom::gpu::mbar_expect_tx(bar, uint32_t(chunks) * 1024u);
  loom::gpu::tma_load_3d(slot, j.map + (chunks < 4), 0, j.row_first(j.unit_of(it), r0),
                         ((warp % kMmaKParts) * kw + b * kMmaSegCols) / 64, bar, policy);
}

// One segment's k-steps into d: `slot` the ring slot's shared address, `xs` the staged input
// (A-fragment order), c0 the segment's first column, cols its columns (a multiple of 32).
template <int M>
__device__ __forceinline__ void mma_segment(float (&d)[4], uint32_t slot, const uint4* xs, int c0,
                                            int cols) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int m = lane >> 3, r = lane & 7;  // this lane's ldmatrix row: matrix m, row r
  const uint32_t row_base = slot + uint32_t(r) * 128u;
  const uint4* xa = xs + ((c0 >> 5) * M + (g < M ? g : 0)) * 4 + t;
#pragma unroll 4
  for (int p = 0; p < cols / 32; p++) {
    uint32_t bq[4];  // granule 4 p + m of the row: chunk p / 2, granule 4 (p mod 2) + m of it
    mma_ldmatrix_x4(bq,
                    row_base + uint32_t(p >> 1) * 1024u + uint32_t(((4 * (p & 1) + m) ^ r) << 4));
    const uint4 a = g < M ? lds128(xa + p * M * 4) : make_uint4(0u, 0u, 0u, 0u);
    mma_k16(d, a.x, a.y, bq[0], bq[1]);
    mma_k16(d, a.z, a.w, bq[2], bq[3]);
  }
}

// Named barriers 1 and 2, one per row group's 8 warps (0 is __syncthreads'; constant ids, so
// ptxas reserves three barriers, not all 16).
__device__ __forceinline__ void group_barrier(int gi) {
  if (gi == 0)
    asm volatile("bar.sync 1, %0;" ::"n"(kMmaKParts * 32) : "memory");
  else
    asm volatile("bar.sync 2, %0;" ::"n"(kMmaKParts * 32) : "memory");
}

// A warp's D fragment into `part` (its 8 slots × 8 rows, fp32).
__device__ __forceinline__ void mma_part_store(const float (&d)[4], float* part) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  reinterpret_cast<float2*>(part)[warp * 32 + (lane >> 2) * 4 + (lane & 3)] =
      make_float2(d[0], d[1]);
}

// End of an item: the warps of row group gi leave their D in `part` (after the group's earlier
// item was read out), and thread jj < 8 M of the group sums row jj / M, slot jj mod M over the
// 8 parts in order. true: this thread holds an output (row i of the group, slot s, val).
template <int M>
__device__ __forceinline__ bool mma_item_out(const float (&d)[4], float* part, int& i, int& s,
                                             float& val) {
  const int gi = (threadIdx.x >> 5) / kMmaKParts;
  group_barrier(gi);
  mma_part_store(d, part);
  group_barrier(gi);
  const int jj = int(threadIdx.x) - gi * kMmaKParts * 32;
  if (jj >= 8 * M) return false;
  i = jj / M, s = jj % M;
  val = 0.0f;
#pragma unroll
  for (int kp = 0; kp < kMmaKParts; kp++) val += part[(gi * kMmaKParts + kp) * 64 + s * 8 + i];
  return true;
}

// mma_item_out for GateUp's paired items (mega_gate_up_row): both row groups leave their D, and
// thread jj < 8 M sums, each over the 8 parts in order, the gate (group 0) and up (group 1) dots
// of column i, slot s — the same sums as mma_item_out's. The barriers are the CTA's: the first
// keeps either group from overwriting its D before the other group's earlier read.
template <int M>
__device__ __forceinline__ bool mma_item_pair(const float (&d)[4], float* part, int& i, int& s,
                                              float& gate, float& up) {
  __syncthreads();
  mma_part_store(d, part);
  __syncthreads();
  const int jj = int(threadIdx.x);
  if (jj >= 8 * M) return false;
  i = jj / M, s = jj % M;
  gate = 0.0f, up = 0.0f;
#pragma unroll
  for (int kp = 0; kp < kMmaKParts; kp++) {
    gate += part[kp * 64 + s * 8 + i];
    up += part[(kMmaKParts + kp) * 64 + s * 8 + i];
  }
  return true;
}

}  // namespace loom::mega
