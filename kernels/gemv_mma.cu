// Tensor-core GEMV (GemvKernel::Mma): y[m, n] = in[m, :] · W[n, :]ᵀ for m ≤ 16 at the cost of
// streaming W once, whatever m is (the FMA kernel's work grows with m).
//
// Work: W's rows in groups of eight (the n of mma.sync m16n8k16), k in chunks of 32: lane (g =
// lane / 4, t = lane % 4) loads W[row g of the group, 32c + 8t .. +8] with one 16-byte load, so
// a warp's load covers 8 rows × 32 k. A group's chunks are split into eight contiguous slices; a
// block's 16 warps take two groups a round (warp w: group w / 8, slice w % 8) and the rounds
// grid-stride over the groups. Each weight vector is the B operand of two mmas (b0 b1 = its k
// pairs 0-1 and 2-3, then 4-5 and 6-7) whose A operand is the staged input at the same k (input
// row g, and g + 8 when m > 8): the mma sums over k, so any k order works as long as A and B
// agree, and neither needs a shuffle. After a round each warp's m × 8 partial sums go to shared
// memory and one thread an output sums its group's eight slices.
//
// Reduction order of y[i, r]: within a slice, the tensor core's fp32 accumulation over the
// slice's chunks in chunk order; then slices 0..7 in order, in fp32, starting from 0. It depends
// on k only, not on the grid or on m.
#include "kernels/gemv_stage.cuh"

namespace loom::gpu {

constexpr int kMmaGroupRows = 8;                                    // the mma's n
constexpr int kMmaSlices = 8;                                       // warps on one group
constexpr int kMmaGroupsPerBlock = kGemvThreads / 32 / kMmaSlices;  // 2
constexpr int kMmaPad = 32;  // bf16 elements after each staged row: 8 lanes of a load phase
                             // (two input rows) hit distinct banks

template <int M>
constexpr size_t mma_smem_bytes(int k) {
  return size_t(M) * (k + kMmaPad) * sizeof(bf16) +                            // xs
         size_t(2) * (kGemvThreads / 32) * M * kMmaGroupRows * sizeof(float);  // part
}

template <int M, GemvIn IN, GemvOut OUT>
__global__ void __launch_bounds__(kGemvThreads) gemv_mma_kernel(GemvArgs a) {
  static_assert(M == 8 || M == 16, "the mma's A rows: 8 used (m ≤ 8) or all 16");
  constexpr int kWarps = kGemvThreads / 32;
  extern __shared__ uint4 gemv_smem[];
  const int k = a.k, ld = k + kMmaPad;
  bf16* xs = reinterpret_cast<bf16*>(gemv_smem);                // [M][ld]
  float* part = reinterpret_cast<float*>(xs + size_t(M) * ld);  // [2][kWarps][M][8] by round parity
  __shared__ float scratch[gemv_scratch_floats<M>()];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int half = warp / kMmaSlices, slice = warp % kMmaSlices;
  const int groups = (a.n + kMmaGroupRows - 1) / kMmaGroupRows;
  const int chunks = (k + 31) / 32;
  const int per_slice = (chunks + kMmaSlices - 1) / kMmaSlices;
  const int c_begin = min(slice * per_slice, chunks), c_end = min(c_begin + per_slice, chunks);
  const int nb = (per_slice + kGemvUnroll - 1) / kGemvUnroll;  // load batches a slice, any warp
  const int first = kMmaGroupsPerBlock * blockIdx.x, stride = kMmaGroupsPerBlock * gridDim.x;
  const int rounds = first < groups ? (groups - 1 - first) / stride + 1 : 0;
  const int iters = rounds * nb;  // the same for every warp of the block: rounds end in a barrier

  // Iteration `it`: batch it % nb of this warp's slice, in round it / nb.
  auto load = [&](uint4(&w)[kGemvUnroll], int it) {
    const int row = (first + (it / nb) * stride + half) * kMmaGroupRows + g;
    const uint4* wrow = static_cast<const uint4*>(a.w) + size_t(row) * (k / 8);
    const int c0 = c_begin + (it % nb) * kGemvUnroll;
#pragma unroll
    for (int u = 0; u < kGemvUnroll; u++) {
      const int c = c0 + u, kk = 32 * c + 8 * t;
      w[u] = row < a.n && c < c_end && kk < k ? load_stream(wrow + kk / 8) : make_uint4(0, 0, 0, 0);
    }
  };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // rows (g, g + 8) of A × columns 2t, 2t + 1 of B
  auto consume = [&](const uint4(&w)[kGemvUnroll], int it) {
    const int c0 = c_begin + (it % nb) * kGemvUnroll;
#pragma unroll
    for (int u = 0; u < kGemvUnroll; u++) {
      const int c = c0 + u, kk = 32 * c + 8 * t;
      if (c >= c_end) continue;  // warp-uniform: the mma needs every lane
      uint4 x0 = make_uint4(0, 0, 0, 0), x1 = x0;
      if (kk < k) {
        x0 = *reinterpret_cast<const uint4*>(xs + size_t(g) * ld + kk);
        if constexpr (M == 16) x1 = *reinterpret_cast<const uint4*>(xs + size_t(g + 8) * ld + kk);
      }
      mma_bf16(acc, x0.x, x1.x, x0.y, x1.y, w[u].x, w[u].y);
      mma_bf16(acc, x0.z, x1.z, x0.w, x1.w, w[u].z, w[u].w);
    }
  };
  auto end_round = [&](int it) {
    if (it % nb != nb - 1) return;
    // The round's end: partials to shared memory, then each output's eight slices in order.
    const int r = it / nb;
    float* p = part + size_t(r & 1) * kWarps * M * kMmaGroupRows;  // [kWarps][M][8]
    float* pw = p + size_t(warp) * M * kMmaGroupRows;
    *reinterpret_cast<float2*>(pw + g * kMmaGroupRows + 2 * t) = make_float2(acc[0], acc[1]);
    if constexpr (M == 16)
      *reinterpret_cast<float2*>(pw + (g + 8) * kMmaGroupRows + 2 * t) =
          make_float2(acc[2], acc[3]);
    __syncthreads();  // the next round writes the other half of `part`
    if (tid < kMmaGroupsPerBlock * M * kMmaGroupRows) {
      const int h = tid / (M * kMmaGroupRows), i = tid / kMmaGroupRows % M, j = tid % kMmaGroupRows;
      const int row = (first + r * stride + h) * kMmaGroupRows + j;
      if (i < a.m && row < a.n) {
        float v = 0.0f;
#pragma unroll
        for (int s = 0; s < kMmaSlices; s++)
          v += p[(size_t(h * kMmaSlices + s) * M + i) * kMmaGroupRows + j];
        store_output<OUT>(a, size_t(i) * a.y_stride + row, v);
      }
    }
#pragma unroll
    for (int e = 0; e < 4; e++) acc[e] = 0.0f;
  };

  stream_weights<M, IN>(a, xs, ld, scratch, iters, load, consume, end_round);
}

template <int M, GemvIn IN, GemvOut OUT>
static Status launch_mma(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  const int groups = (a.n + kMmaGroupRows - 1) / kMmaGroupRows;
  return launch_gemv<gemv_mma_kernel<M, IN, OUT>>(
      a, mma_smem_bytes<M>(a.k), (groups + kMmaGroupsPerBlock - 1) / kMmaGroupsPerBlock, num_sms,
      stream);
}

Status gemv_mma(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  return dispatch_in_out(a, [&](auto in, auto out) {
    constexpr GemvIn IN = decltype(in)::value;
    constexpr GemvOut OUT = decltype(out)::value;
    if (a.m <= 8) return launch_mma<8, IN, OUT>(a, num_sms, stream);
    return launch_mma<16, IN, OUT>(a, num_sms, stream);
  });
}

}  // namespace loom::gpu
