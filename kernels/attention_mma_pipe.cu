// Pipelined tensor-core decode attention (bf16): the large-batch decode kernel (issue #4: at
// batch 256 and ~8000 keys a step is bounded by the KV read). The arithmetic, and so every
// output bit, is the split decode kernel's (attention_mma.cu's header comment): a partition's
// result is E merged in order with its tiles' partials, the row total E merged in order with
// the partitions; what differs is who computes what, and when:
//  - a warp computes a whole partition, its tiles in order, folding them in registers as the
//    prefill kernel does (no shared-memory fold, no block barrier anywhere);
//  - work items are (tile, kv head, partition), pair-major, partitions past the sequence's
//    last skipped; the grid is persistent (as many 4-warp blocks as fit, one per SM at
//    head_dim 64) and warp gw = 4 block + warp takes items gw, gw + NW, ... (NW warps in all),
//    so the equal-sized items spread evenly, with no wave tail;
//  - each warp streams its items' tiles through its own ring of kStages (K, V) tile buffers
//    with cp.async, kStages - 1 tiles ahead of the one it computes, across item boundaries:
//    2 tiles (32 KB) per warp, 128 KB per SM in flight while it computes;
//  - at an item's end the warp writes the partition result to mma_partial (one partition:
//    the output itself), counts it on the (tile, kv head)'s counter, and the warp that counts
//    the last partition folds them all (combine_partitions); without counters the combine
//    kernel does.
// Inputs: q rotated and key p in the cache (the launcher runs rope_kv_write first when asked
// to fuse RoPE). Under programmatic dependent launch the first tiles, but for key p, are
// requested before griddepcontrol.wait (see the kernel).
#include "kernels/attention_mma.cuh"

namespace loom::gpu::mma_impl {

namespace {

constexpr int kStages = 3;  // tile buffers per warp

// One work item: partition `part` of (tile, kv head), with what its loads and writes need.
struct PipeItem {
  int f;  // item index (pair-major: (tile * kv_heads + hkv) * max_parts + part); n_items: none
  int tile, hkv, part, seq, slot;
  int p;        // the slot's position: keys [0, p]
  int n_parts;  // partitions of the row: p / 256 + 1
  int n_t;      // tiles of this partition with keys <= p (1..4)
};

__device__ __forceinline__ int ceil_div_dev(int x, int y) {
  return (x + y - 1) / y;
}

// The first active item at or after f in the warp's sequence f, f + stride, ...; a pair whose
// partitions are all past p is skipped in one step.
__device__ __forceinline__ PipeItem find_item(const AttentionArgs& a, int f, int stride,
                                              int n_items, int max_parts) {
  PipeItem it;
  while (f < n_items) {
    const int pair = f / max_parts, part = f - pair * max_parts;
    const int tile = pair / a.kv_heads;
    const int seq = a.tiles[tile * 3], j0 = a.tiles[tile * 3 + 1];
    const int p = a.kv_len[seq] + j0;
    const int n_parts = p / kMmaPartKeys + 1;
    if (part < n_parts) {
      it.f = f;
      it.tile = tile;
      it.hkv = pair - tile * a.kv_heads;
      it.part = part;
      it.seq = seq;
      it.slot = a.slot_start[seq] + j0;
      it.p = p;
      it.n_parts = n_parts;
      it.n_t = min(kMmaPartTiles, (p - part * kMmaPartKeys) / kMmaTileKeys + 1);
      return it;
    }
    f += max(1, ceil_div_dev((pair + 1) * max_parts - f, stride)) * stride;  // next pair
  }
  it.f = n_items;
  return it;
}

// q of the item's G heads as the A fragments (rows >= G zero).
template <int D>
__device__ __forceinline__ void item_q(const AttentionArgs& a, const PipeItem& it, int G, int lane,
                                       uint32_t (&qa)[D / 16][4]) {
  const int g = lane >> 2;
  const bf16* q0 = static_cast<const bf16*>(a.qkv) +
                   size_t(it.slot) * (a.heads + 2 * a.kv_heads) * D + size_t(it.hkv) * G * D;
  load_q<D>(g < G ? q0 + g * D : nullptr, g + 8 < G ? q0 + (g + 8) * D : nullptr, lane, qa);
}

// The item's partition result (rows g, g + 8 of the warp; rows >= G are padding): to
// mma_partial, counted, and folded by the last warp; or, one partition, the output.
template <int D>
__device__ __forceinline__ void finish_item(const AttentionArgs& a, const PipeItem& it,
                                            const RowState<D>& part, int G, int max_parts,
                                            int lane) {
  const int g = lane >> 2, tig = lane & 3;
  if (it.n_parts == 1) {
    // Row total = merge(E, partition), as the prefill kernel computes it.
    RowState<D> total;
    total.clear();
    bf16* out = static_cast<bf16*>(a.out) + size_t(it.slot) * a.heads * D;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = g + 8 * h;
      if (r >= G) continue;
      merge_row(total, part, h);
      bf16* o = out + size_t(it.hkv * G + r) * D;
#pragma unroll
      for (int i = 0; i < D / 8; i++) {
        const float x = __fdiv_rn(total.acc[i][2 * h], total.l[h]);
        const float y = __fdiv_rn(total.acc[i][2 * h + 1], total.l[h]);
        *reinterpret_cast<__nv_bfloat162*>(o + i * 8 + tig * 2) = __floats2bfloat162_rn(x, y);
      }
    }
    return;
  }
  // mma_partial [n_tiles, kv_heads, max_parts, G, D + 2]: acc, then m, l (even offsets: float2).
  float* dst =
      a.mma_partial + ((size_t(it.tile) * a.kv_heads + it.hkv) * max_parts + it.part) * G * (D + 2);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = g + 8 * h;
    if (r >= G) continue;
    float* row = dst + size_t(r) * (D + 2);
#pragma unroll
    for (int i = 0; i < D / 8; i++)
      *reinterpret_cast<float2*>(row + i * 8 + tig * 2) =
          make_float2(part.acc[i][2 * h], part.acc[i][2 * h + 1]);
    if (tig == 0) *reinterpret_cast<float2*>(row + D) = make_float2(part.m[h], part.l[h]);
  }
  if (a.mma_counters == nullptr) return;  // the combine kernel folds
  // Threadfence reduction: partials written, fence, count; the last one fences and reads.
  __threadfence();
  __syncwarp();
  int last = 0;
  if (lane == 0) {
    int* counter = a.mma_counters + size_t(it.tile) * a.kv_heads + it.hkv;
    last = atomicAdd(counter, 1) == it.n_parts - 1;
    if (last) *counter = 0;  // every partition has counted: ready for the next call
  }
  last = __shfl_sync(0xffffffffu, last, 0);
  if (last) {
    __threadfence();
    combine_partitions<D>(a, it.tile, it.hkv, it.n_parts, it.slot, lane, 32);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1) paged_attention_mma_pipe_kernel(AttentionArgs a) {
  using Tl = MmaTile<D>;
  extern __shared__ uint4 mma_smem[];
  pdl_trigger();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int G = a.heads / a.kv_heads;
  const int max_parts = attention_mma_max_parts(a.bt_stride, a.block_size);
  const int n_items = a.n_tiles * a.kv_heads * max_parts;
  const int stride = int(gridDim.x) * kMmaWarps;
  const int gw = int(blockIdx.x) * kMmaWarps + warp;
  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const size_t kv_row = size_t(a.kv_heads) * D;
  // The warp's ring: tile number i (counted over the warp's whole stream) in buffer i % kStages,
  // a K tile then a V tile each.
  bf16* ring = reinterpret_cast<bf16*>(mma_smem) + size_t(warp) * kStages * 2 * Tl::kElems;
  auto buf = [&](int i) { return ring + size_t(i % kStages) * 2 * Tl::kElems; };

  // Producer: item pi, its tile pt next; one commit group per call (empty past the last item,
  // so that the group count stays in step with the tile count).
  PipeItem pi = find_item(a, gw, stride, n_items, max_parts);
  if (pi.f >= n_items) return;
  PipeItem ci = pi;  // consumer: item ci, its tile ct next
  int pt = 0, issued = 0;
  auto produce = [&](bool pre_wait) {
    if (pi.f < n_items) {
      bf16* k = buf(issued);
      load_tile<D, 32>(kc, vc, a.block_tables + size_t(pi.seq) * a.bt_stride, a.block_size, kv_row,
                       pi.hkv, (pi.part * kMmaPartTiles + pt) * kMmaTileKeys, pi.p + 1,
                       pre_wait ? pi.p : -1, k, k + Tl::kElems, lane);
      if (++pt == pi.n_t) {
        pi = find_item(a, pi.f + stride, stride, n_items, max_parts);
        pt = 0;
      }
    }
    cp_async_commit();
    issued++;
  };
  // Before griddepcontrol.wait the warp reads only the step's inputs (tiles, kv_len,
  // slot_start, block tables: uploaded before the step's first kernel) and cached keys < p
  // (earlier steps'): its first kStages - 1 tiles stream in while the previous kernels finish,
  // all but key p, which the previous kernel (rope_kv_write) writes: loaded after the wait.
  int row_kk[kStages - 1], row_seq[kStages - 1], row_hkv[kStages - 1], row_key[kStages - 1];
#pragma unroll
  for (int s = 0; s < kStages - 1; s++) {
    row_kk[s] = -1;
    if (pi.f < n_items) {
      const int key0 = (pi.part * kMmaPartTiles + pt) * kMmaTileKeys;
      if (pi.p < key0 + kMmaTileKeys) row_kk[s] = pi.p - key0;  // this tile holds key p
      row_seq[s] = pi.seq;
      row_hkv[s] = pi.hkv;
      row_key[s] = pi.p;
    }
    produce(true);
  }
  pdl_wait();  // qkv (q rotated) and key p come from the previous kernels
#pragma unroll
  for (int s = 0; s < kStages - 1; s++)
    if (row_kk[s] >= 0)
      load_row<D>(kc, vc, a.block_tables + size_t(row_seq[s]) * a.bt_stride, a.block_size, kv_row,
                  row_hkv[s], row_key[s], row_kk[s], buf(s), buf(s) + Tl::kElems, lane);
  cp_async_commit();
  cp_async_wait<0>();  // the first tiles, whole (later waits count only the pending groups)

  uint32_t qa[D / 16][4];
  item_q<D>(a, ci, G, lane, qa);
  RowState<D> part;
  part.clear();
  int ct = 0;
  for (int k = 0;; k++) {
    produce(false);                // tile k + kStages - 1 (into the buffer tile k - 1 used)
    cp_async_wait<kStages - 1>();  // tile k has landed (this lane's copies) ...
    __syncwarp();                  // ... and every lane's
    const int key0 = (ci.part * kMmaPartTiles + ct) * kMmaTileKeys;
    const int p_lo = g < G ? ci.p : -1, p_hi = g + 8 < G ? ci.p : -1;
    RowState<D> t;
    tile_partial<D>(qa, buf(k), buf(k) + Tl::kElems, key0, p_lo, p_hi, lane, t);
    __syncwarp();  // every lane's reads of buffer k are done before tile k + kStages lands there
#pragma unroll
    for (int h = 0; h < 2; h++)
      if (key0 <= (h ? p_hi : p_lo)) merge_row(part, t, h);
    if (++ct < ci.n_t) continue;
    // The partition is complete. The next item's q loads go out before this one's writes
    // and counter round trips.
    const PipeItem next = find_item(a, ci.f + stride, stride, n_items, max_parts);
    uint32_t qn[D / 16][4];
    if (next.f < n_items) item_q<D>(a, next, G, lane, qn);
    finish_item<D>(a, ci, part, G, max_parts, lane);
    if (next.f >= n_items) break;
    ci = next;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
      for (int r = 0; r < 4; r++) qa[ks][r] = qn[ks][r];
    part.clear();
    ct = 0;
  }
}

}  // namespace

Status launch_mma_pipe(const AttentionArgs& a, cudaStream_t stream) {
  const int D = a.head_dim;
  auto launch = [&](auto kernel, int bytes, bool& done, int& per_sm) -> Status {
    Status st = allow_smem(kernel, bytes, done, "paged_attention_mma_pipe");
    if (!st.ok) return st;
    if (per_sm == 0) {
      const cudaError_t e =
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, bytes);
      if (e != cudaSuccess)
        return Status::bad(cat("paged_attention_mma_pipe: occupancy: ", cudaGetErrorString(e)));
      if (per_sm < 1)
        return Status::bad(cat("paged_attention_mma_pipe: ", bytes, " bytes of shared memory a ",
                               "block do not fit an SM"));
    }
    // Persistent: as many blocks as are resident at once. Only the speed depends on it.
    const cudaError_t e =
        launch_kernel(kernel, dim3(per_sm * device_sms()), kThreads, bytes, stream, a.pdl, a);
    if (e != cudaSuccess)
      return Status::bad(cat("paged_attention_mma_pipe: launch: ", cudaGetErrorString(e)));
    return launch_status("paged_attention_mma_pipe");
  };
  if (D == 16) {
    static bool done = false;
    static int per_sm = 0;
    return launch(paged_attention_mma_pipe_kernel<16>,
                  kMmaWarps * kStages * MmaTile<16>::kPairBytes, done, per_sm);
  }
  static bool done = false;
  static int per_sm = 0;
  return launch(paged_attention_mma_pipe_kernel<64>, kMmaWarps * kStages * MmaTile<64>::kPairBytes,
                done, per_sm);
}

}  // namespace loom::gpu::mma_impl
