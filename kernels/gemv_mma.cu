// Tensor-core GEMV (GemvKernel::Mma): y[m, n] = in[m, :] · W[n, :]ᵀ for m ≤ 16 at the cost of
// streaming W once, whatever m is (the FMA kernel's work grows with m).
//
// Work: W's rows in groups of eight (the n of mma.sync m16n8k16), k in chunks of 32: lane (g =
// lane / 4, t = lane % 4) loads W[row g of the group, 32c + 8t .. +8] with one 16-byte load, so
// a warp's load covers 8 rows × 32 k. A cluster of S = k_split blocks shares each row group:
// block (rank) q of the cluster takes the q-th of S contiguous ranges of chunks and stages only
// that range of the m input rows (at 8-16 rows, staging every row's whole k cost as much as the
// weights of a short GEMV: bench/NOTES-cuda.md, session 28). A block's range is split into P =
// 8 / S contiguous slices, so that a warp's slice is k / 8 whatever S is (its loads in flight,
// 8 × 16 bytes a lane, stay full); the block's 16 warps take 16 / P groups a round (warp w:
// group w / P, slice w % P) and the clusters' rounds grid-stride over the groups, 2S groups a
// cluster. Each weight vector is the B operand of two mmas (b0 b1 = its k pairs 0-1 and 2-3,
// then 4-5 and 6-7) whose A operand is the staged input at the same k (input row g, and g + 8
// when m > 8): the mma sums over k, so any k order works as long as A and B agree, and neither
// needs a shuffle. After a round each warp's m × 8 partial sums go to shared memory and one
// thread an output sums its group's P slices; with S = 1 that is the output, else the block
// keeps it for as many rounds as `kept` holds, then (cluster barrier) the cluster's threads sum
// the S blocks' values through distributed shared memory and store the outputs (a second
// barrier before `kept` is refilled).
//
// Reduction order of y[i, r]: within a slice, the tensor core's fp32 accumulation over the
// slice's chunks in chunk order; then the block's P slices in order, in fp32, from 0; then (S >
// 1) the blocks' sums in rank order, in fp32, from 0. It depends on k and S only, not on m or the
// grid.
#include <cooperative_groups.h>

#include "kernels/gemv_stage.cuh"

namespace cg = cooperative_groups;

namespace loom::gpu {

constexpr int kMmaGroupRows = 8;  // the mma's n
constexpr int kMmaSlices = 8;     // slices of k a group, over the cluster's blocks (S × P)
constexpr int kMmaPad = 32;       // bf16 elements after each staged row: 8 lanes of a load phase
                                  // (two input rows) hit distinct banks
constexpr int kMmaKeptFloats = 2048;  // S > 1: the block's sums kept for the cluster (8 KB)

// Chunks of 32 k a block of a cluster of s stages (its range; the last one's may be shorter).
inline __host__ __device__ int mma_block_chunks(int k, int s) {
  return ((k + 31) / 32 + s - 1) / s;
}

template <int M>
size_t mma_smem_bytes(int k, int s) {
  return size_t(M) * (32 * mma_block_chunks(k, s) + kMmaPad) * sizeof(bf16) +   // xs
         size_t(2) * (kGemvThreads / 32) * M * kMmaGroupRows * sizeof(float) +  // part
         (s > 1 ? size_t(kMmaKeptFloats) * sizeof(float) : 0);                  // kept
}

template <int M, GemvIn IN, GemvOut OUT>
__global__ void __launch_bounds__(kGemvThreads) gemv_mma_kernel(GemvArgs a) {
  static_assert(M == 8 || M == 16, "the mma's A rows: 8 used (m ≤ 8) or all 16");
  constexpr int kWarps = kGemvThreads / 32;
  extern __shared__ uint4 gemv_smem[];
  const int k = a.k, S = a.k_split;              // S: the cluster's size (the launch's)
  const int P = kMmaSlices / S, G = kWarps / P;  // slices a group, groups a round (block)
  const int R = G * M * kMmaGroupRows;           // outputs a round (block)
  const int F = max(1, kMmaKeptFloats / R);      // S > 1: rounds kept before a flush
  const int rank = blockIdx.x % S, cluster = blockIdx.x / S, clusters = gridDim.x / S;
  // This block's chunks [cb0, cb1) and staged columns [kb0, kb0 + kw).
  const int chunks = (k + 31) / 32, block_chunks = mma_block_chunks(k, S);
  const int cb0 = min(rank * block_chunks, chunks), cb1 = min(cb0 + block_chunks, chunks);
  const int kb0 = 32 * cb0, kw = min(32 * cb1, k) - kb0;
  const int ld = 32 * block_chunks + kMmaPad;
  bf16* xs = reinterpret_cast<bf16*>(gemv_smem);                // [M][ld]
  float* part = reinterpret_cast<float*>(xs + size_t(M) * ld);  // [2][kWarps][M][8] by round parity
  float* kept = part + size_t(2) * kWarps * M * kMmaGroupRows;  // S > 1: [F][R]
  __shared__ float scratch[gemv_scratch_floats<M>()];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int grp = warp / P, slice = warp % P;
  const int groups = (a.n + kMmaGroupRows - 1) / kMmaGroupRows;
  const int per_slice = (cb1 - cb0 + P - 1) / P;
  const int c_begin = min(cb0 + slice * per_slice, cb1), c_end = min(c_begin + per_slice, cb1);
  // Load batches a slice, any warp; at least one, so that a block whose range is empty (more
  // ranks than chunks) still takes part in its cluster's rounds.
  const int nb = max(1, (per_slice + kGemvUnroll - 1) / kGemvUnroll);
  const int first = G * cluster, stride = G * clusters;
  const int rounds = first < groups ? (groups - 1 - first) / stride + 1 : 0;
  const int iters = rounds * nb;  // the same for every warp of the cluster: rounds end in barriers

  // Iteration `it`: batch it % nb of this warp's slice, in round it / nb.
  auto load = [&](uint4(&w)[kGemvUnroll], int it) {
    const int row = (first + (it / nb) * stride + grp) * kMmaGroupRows + g;
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
        const bf16* xk = xs + (kk - kb0);
        x0 = *reinterpret_cast<const uint4*>(xk + size_t(g) * ld);
        if constexpr (M == 16) x1 = *reinterpret_cast<const uint4*>(xk + size_t(g + 8) * ld);
      }
      mma_bf16(acc, x0.x, x1.x, x0.y, x1.y, w[u].x, w[u].y);
      mma_bf16(acc, x0.z, x1.z, x0.w, x1.w, w[u].z, w[u].w);
    }
  };
  // Output e of a round: group e / (M · 8) of the round, input row e / 8 % M, row e % 8 of it.
  auto store = [&](int r, int e, float v) {
    const int h = e / (M * kMmaGroupRows), i = e / kMmaGroupRows % M, j = e % kMmaGroupRows;
    const int row = (first + r * stride + h) * kMmaGroupRows + j;
    if (i < a.m && row < a.n) store_output<OUT>(a, size_t(i) * a.y_stride + row, v);
  };
  // The cluster's sums of rounds r0 .. r1 (r0 a multiple of F): the blocks' values in rank
  // order, read from their shared memory; the cluster's threads share the outputs.
  auto flush = [&](int r0, int r1) {
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();  // every block's values of these rounds are kept
    for (int o = rank * kGemvThreads + tid; o < (r1 - r0 + 1) * R; o += S * kGemvThreads) {
      float v = 0.0f;
      for (int q = 0; q < S; q++) v += cl.map_shared_rank(kept, q)[o];
      store(r0 + o / R, o % R, v);
    }
    cl.sync();  // no block refills `kept`, or exits, while another reads it
  };
  auto end_round = [&](int it) {
    if (it % nb != nb - 1) return;
    // The round's end: partials to shared memory, then each output's P slices in order.
    const int r = it / nb;
    float* p = part + size_t(r & 1) * kWarps * M * kMmaGroupRows;  // [kWarps][M][8]
    float* pw = p + size_t(warp) * M * kMmaGroupRows;
    *reinterpret_cast<float2*>(pw + g * kMmaGroupRows + 2 * t) = make_float2(acc[0], acc[1]);
    if constexpr (M == 16)
      *reinterpret_cast<float2*>(pw + (g + 8) * kMmaGroupRows + 2 * t) =
          make_float2(acc[2], acc[3]);
    __syncthreads();  // the next round writes the other half of `part`
    for (int e = tid; e < R; e += kGemvThreads) {
      const int h = e / (M * kMmaGroupRows), i = e / kMmaGroupRows % M, j = e % kMmaGroupRows;
      float v = 0.0f;
      for (int s = 0; s < P; s++) v += p[(size_t(h * P + s) * M + i) * kMmaGroupRows + j];
      if (S == 1)
        store(r, e, v);
      else
        kept[(r % F) * R + e] = v;
    }
    if (S > 1 && (r % F == F - 1 || r == rounds - 1)) flush(r - r % F, r);
#pragma unroll
    for (int e = 0; e < 4; e++) acc[e] = 0.0f;
  };

  stream_weights<M, IN>(a, xs, ld, scratch, kb0, kw, iters, load, consume, end_round);
}

template <int M, GemvIn IN, GemvOut OUT>
static Status launch_mma(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  const int groups = (a.n + kMmaGroupRows - 1) / kMmaGroupRows;
  const int per_cluster = 2 * a.k_split;  // groups a cluster's round takes (G = 2S a block)
  return launch_gemv<gemv_mma_kernel<M, IN, OUT>>(
      a, mma_smem_bytes<M>(a.k, a.k_split), (groups + per_cluster - 1) / per_cluster * a.k_split,
      num_sms, stream, a.k_split);
}

int gemv_mma_k_split(int n, int k) {
  if (n >= 32768) return 1;
  const int chunks = (k + 31) / 32;
  int s = 1;
  while (s < kGemvMaxKSplit && chunks / (2 * s) >= 16) s *= 2;
  return s;
}

Status gemv_mma(const GemvArgs& a0, int num_sms, cudaStream_t stream) {
  GemvArgs a = a0;
  if (a.k_split == 0) a.k_split = gemv_mma_k_split(a.n, a.k);
  return dispatch_in_out(a, [&](auto in, auto out) {
    constexpr GemvIn IN = decltype(in)::value;
    constexpr GemvOut OUT = decltype(out)::value;
    if (a.m <= 8) return launch_mma<8, IN, OUT>(a, num_sms, stream);
    return launch_mma<16, IN, OUT>(a, num_sms, stream);
  });
}

}  // namespace loom::gpu
