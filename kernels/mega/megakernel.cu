// The decode-step megakernel: the interpreter of the per-SM instruction lists and its launch.
// Contracts, counters and reduction orders: instructions.h; the families: gemv_ops.cuh and
// attention_ops.cuh; synchronisation: sync.cuh.
//
// One launch is one step (steps never overlap: the next launch is an ordinary stream/graph
// dependency). Every CTA reads MegaSyncHeader::step once at its start and works for epoch
// step + 1; the last CTA to finish stores step = epoch (after every CTA has read it). A CTA
// whose wait gives up leaves the kernel; then step is not advanced and the host, which finds
// trap_counter set, zeroes the block before any further launch.
#include <algorithm>
#include <type_traits>

#include "kernels/mega/attention_groups.cuh"
#include "kernels/mega/gemv_ops.cuh"
#include "kernels/mega/megakernel.cuh"

namespace loom::mega {

template <bool kMma>
using MegaTmapsParam = std::conditional_t<kMma, MegaTmaps, MegaNoTmaps>;

template <class T, int M, bool kMma>
__global__ void __launch_bounds__(kMegaThreads, 1)
    megakernel(const MegaArgs a, const __grid_constant__ MegaTmapsParam<kMma> tmaps) {
  extern __shared__ uint4 mega_smem[];
  __shared__ MegaShared sh;
  MegaCtx c;
  c.sync = a.sync;
  c.counters = reinterpret_cast<uint32_t*>(a.sync + 1);
  c.epoch = ld_relaxed_gpu(&a.sync->step) + 1;
  c.timeout_ns = a.timeout_ns;
  c.jitter_seed = a.jitter_seed;
  c.trace = a.trace != nullptr;
  c.skip_waits = a.skip_waits;
  c.waited = 0;
  const int prog = a.cta_program != nullptr ? a.cta_program[blockIdx.x] : int(blockIdx.x);
  const uint32_t base = loom::gpu::smem_u32(mega_smem);
  constexpr uint32_t align = kMma ? kMegaMmaAlign : kMegaAlign;
  char* dyn = reinterpret_cast<char*>(mega_smem) + (align - base % align) % align + a.smem_skew;
  T* xs = reinterpret_cast<T*>(dyn);  // staged GEMV input, then the weight ring
  char* ring = dyn + mega_xs_bytes(a.d, sizeof(T));
  const int prog_end = a.prog_begin[prog + 1];
  WeightStream ws;  // this warp's weight segments (gemv_ops.cuh)
  if ((threadIdx.x & 31) == 0) {
    for (int s = 0; s < a.gemv_stages; s++) loom::gpu::mbar_init(&sh.bar[threadIdx.x >> 5][s], 1);
    WeightCursor& cur = sh.cursor[threadIdx.x >> 5];
    cur.issued = 0, cur.pc = a.prog_begin[prog], cur.it = -1;
  }
  if constexpr (kMma)
    if (threadIdx.x == 0) sh.tmaps = tmaps.m;
  loom::gpu::fence_mbar_init();
  __syncthreads();
  bool ok = true;
  // With attention's buffers apart from the ring (1-2 slots), an AttnPartial's first partition
  // is staged by cp.async started with the instruction before it (attn_prefetch).
  const bool apart = M <= 2 && a.attn_apart;
  // gemv_mma.cuh's D of every warp after the ring (kMma), then attention's buffers if apart.
  float* part = reinterpret_cast<float*>(ring + size_t(kMegaWarps) * a.gemv_stages * kGemvSegBytes);
  char* attn_smem = apart ? reinterpret_cast<char*>(part) + (kMma ? kMmaPartBytes : 0) : dyn;
  bool prefetched = false;
  for (int i = a.prog_begin[prog]; ok && i < prog_end; i++) {
    const MegaInstruction in = a.instrs[i];
    const MegaOp op = MegaOp(in.op);
    // (At 4-8 slots the start waits in shared memory: a register across the switch spilled.)
    uint64_t t0 = c.trace && threadIdx.x == 0 ? global_ns() : 0;
    if constexpr (M >= 4)
      if (threadIdx.x == 0) sh.t0 = t0;
    c.waited = 0;
    c.staged = 0;
    // The next instruction's prefetch starts with this one, unless this one is an AttnPartial
    // too: its buffers are free only once it ran (its last barrier), so it starts after it.
    // (Staging it as soon as the buffers are free, during the previous layer, measured no
    // faster: bench/NOTES-cuda.md, session 55.)
    auto prefetch_next = [&] {
      if (apart && i + 1 < prog_end && a.instrs[i + 1].op == uint8_t(MegaOp::AttnPartial))
        prefetched = attn_prefetch<T>(a, a.instrs[i + 1].layer, a.instrs[i + 1].begin, attn_smem);
    };
    if (op != MegaOp::AttnPartial) prefetch_next();
    switch (op) {
      case MegaOp::Embed:
        run_embed<T, M>(a, c, in.begin, in.end);
        break;
      case MegaOp::AttnReduce:  // run by the AttnPartial split completing (b, g)
        break;
      case MegaOp::AttnPartial:
        if constexpr (kMma)  // (bf16, 4-8 slots: mega_gemv_mma checks attn_groups_fit)
          ok = run_attn_groups<T>(a, c, in.layer, in.begin, in.end, attn_smem, sh);
        else
          ok = run_attn_partial<T, M>(a, c, in.layer, in.begin, in.end, attn_smem, prefetched,
                                      sh.last);
        prefetched = false;
        if (ok) prefetch_next();
        break;
      case MegaOp::FinalNorm:
        ok = run_final_norm<T, M, kMma>(a, c, in.begin, in.end, sh);
        break;
      case MegaOp::Draw:
        ok = run_draw<M>(a, c, in.begin, in.end, sh);
        break;
      case MegaOp::LmHead:  // its own instantiation at 1-2 slots (run_gemv's kLm)
        ok = run_gemv<T, M, (M <= 2 && !kMma), kMma>(a, c, op, 0, in.begin, in.end, i, prog_end, xs,
                                                     ring, part, ws, sh);
        break;
      default:  // Qkv, OProj, GateUp, Down
        ok = run_gemv<T, M, false, kMma>(a, c, op, in.layer, in.begin, in.end, i, prog_end, xs,
                                         ring, part, ws, sh);
        break;
    }
    if (c.trace && threadIdx.x == 0) {
      MegaTraceEntry& e = a.trace[size_t(prog) * a.trace_stride + (i - a.prog_begin[prog])];
      e.start = M >= 4 ? sh.t0 : t0;
      e.end = global_ns();
      e.waited = c.waited;
      e.staged = c.staged;
      e.op = in.op;
      e.layer = in.layer;
    }
  }
  if (!ok) {
    drain(a, ws, sh);  // no copy may land after the CTA left
    loom::gpu::cp_async_wait<0>();
    return;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const uint32_t before = atomicAdd(&a.sync->done, 1u);
    if (before + 1 == c.epoch * uint32_t(gridDim.x)) st_release_gpu(&a.sync->step, c.epoch);
  }
}

static size_t attn_bytes(const MegaDims& d, DType t) {
  const bool padded = d.batch > 2;  // (attention_ops.cuh's rows: kv_chunk's swizzle at 1-2)
  return t == DType::BF16 ? attn_smem_bytes<bf16>(d.group_size(), d.head_dim, padded)
                          : attn_smem_bytes<float>(d.group_size(), d.head_dim, padded);
}

bool mega_gemv_mma(const MegaDims& d, DType t) {
  return t == DType::BF16 && d.batch >= 4 && mega_mma_fits(d.hidden) && mega_mma_fits(d.q_dim()) &&
         mega_mma_fits(d.intermediate) && d.rows_per_tile % 16 == 0 &&
         d.lm_rows_per_tile % 16 == 0 && mega_tmap_count(d) <= kMegaMaxTmaps &&
         attn_groups_fit(d.group_size(), d.head_dim);
}

loom::gpu::Status mega_encode_tmaps(const MegaDims& d, const MegaLayer* layers, const void* lm_head,
                                    MegaTmaps& out) {
  if (mega_tmap_count(d) > kMegaMaxTmaps)
    return loom::gpu::Status::bad(loom::cat("megakernel: ", mega_tmap_count(d),
                                            " weight tensor maps (at most ", kMegaMaxTmaps, ")"));
  // A weight [n, k] as {64 columns, n rows, k / 64 chunks}, a box of {64, 8, chunks}.
  auto encode = [&](int index, const void* w, int n, int k, const char* what) {
    const uint64_t dims[3] = {64, uint64_t(n), uint64_t(k / 64)};
    const uint64_t strides[2] = {uint64_t(k) * 2, 128};
    loom::gpu::Status st = loom::gpu::Status::good();
    for (int tail = 0; st.ok && tail <= int(mega_mma_tail(k)); tail++) {
      const uint32_t chunks = tail ? uint32_t(k / kMmaKParts % kMmaSegCols / 64) : 4u;
      const uint32_t box[3] = {64, 8, chunks};
      st = loom::gpu::encode_tensor_map_3d(out.m[index + tail], w, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                           dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, what);
    }
    return st;
  };
  loom::gpu::Status st = loom::gpu::Status::good();
  for (int l = 0; st.ok && l < d.layers; l++) {
    const struct {
      MegaOp op;
      const void* w;
      int n, k;
      const char* what;
    } weights[] = {
        {MegaOp::Qkv, layers[l].qkv, d.qkv_rows(), d.hidden, "megakernel: qkv"},
        {MegaOp::OProj, layers[l].o, d.hidden, d.q_dim(), "megakernel: o"},
        {MegaOp::GateUp, layers[l].gate_up, 2 * d.intermediate, d.hidden, "megakernel: gate_up"},
        {MegaOp::Down, layers[l].down, d.hidden, d.intermediate, "megakernel: down"}};
    for (const auto& x : weights)
      if (st.ok) st = encode(mega_tmap_index(d, x.op, l), x.w, x.n, x.k, x.what);
  }
  if (st.ok)
    st = encode(mega_tmap_index(d, MegaOp::LmHead, 0), lm_head, d.vocab, d.hidden,
                "megakernel: lm_head");
  return st;
}

size_t mega_smem_bytes(const MegaDims& d, DType t, int gemv_stages, bool attn_apart, bool mma) {
  const size_t elt = dtype_size(t);
  const size_t gemv = mega_xs_bytes(d, elt) + size_t(kMegaWarps) * gemv_stages * kGemvSegBytes +
                      (mma ? kMmaPartBytes : 0);
  return (mma ? kMegaMmaAlign : kMegaAlign) +
         (attn_apart ? gemv + attn_bytes(d, t) : std::max(gemv, attn_bytes(d, t)));
}

bool mega_attn_in_xs(const MegaDims& d, DType t) {
  return attn_bytes(d, t) <= mega_xs_bytes(d, dtype_size(t));
}

int mega_gemv_stages(const MegaDims& d, DType t, int smem_optin, bool attn_apart, bool mma) {
  // The static MegaShared beside the dynamic buffer. Without the tensor-core GEMVs also a 1 KB
  // margin, with which the ring's depth at batch 1-2 was measured (3 slots, where they fit
  // without it, gained nothing: bench/NOTES-cuda.md session 56); with them the 1,024-byte
  // alignment's padding is counted whole instead (batch 8 on Terra: 752 bytes to spare).
  const size_t margin = mma ? 0 : 1024;
  for (int s = kGemvMaxStages; s >= 2; s--)
    if (mega_smem_bytes(d, t, s, attn_apart, mma) + sizeof(MegaShared) + margin <=
        size_t(smem_optin))
      return s;
  return 0;
}

template <class T, int M, bool kMma>
static loom::gpu::Status launch(const MegaArgs& a, cudaStream_t stream) {
  const size_t smem = mega_smem_bytes(a.d, a.t, a.gemv_stages, a.attn_apart, kMma) + a.smem_skew;
  static size_t configured = 48 * 1024;
  if (smem > configured) {
    const cudaError_t e = cudaFuncSetAttribute(
        megakernel<T, M, kMma>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess)
      return loom::gpu::Status::bad(
          loom::cat("megakernel: ", smem, " bytes of shared memory: ", cudaGetErrorString(e)));
    configured = smem;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(a.num_ctas));
  cfg.blockDim = dim3(kMegaThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;  // every CTA resident: the waits need it
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  MegaTmapsParam<kMma> tmaps{};
  if constexpr (kMma) tmaps = *a.tmaps;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, megakernel<T, M, kMma>, a, tmaps);
  if (e != cudaSuccess)
    return loom::gpu::Status::bad(loom::cat("megakernel: launch: ", cudaGetErrorString(e)));
  return loom::gpu::launch_status("megakernel");
}

template <class T, bool kMma>
static loom::gpu::Status dispatch_batch(const MegaArgs& a, cudaStream_t stream) {
  switch (a.d.batch) {
    case 1:  // (the tensor-core GEMVs from 4 slots: mega_gemv_mma)
      if constexpr (!kMma) return launch<T, 1, false>(a, stream);
      break;
    case 2:
      if constexpr (!kMma) return launch<T, 2, false>(a, stream);
      break;
    case 4:
      return launch<T, 4, kMma>(a, stream);
    case 8:
      return launch<T, 8, kMma>(a, stream);
  }
  return loom::gpu::Status::bad(
      loom::cat("megakernel: batch ", a.d.batch, " is not a graph bucket (1, 2, 4 or 8)"));
}

loom::gpu::Status mega_step(const MegaArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.instrs && a.prog_begin && a.sync && a.layers && a.num_ctas > 0,
                 "megakernel: null schedule, sync block or layers");
  LOOM_ARG_CHECK(a.t == DType::BF16 || a.t == DType::F32, "megakernel: dtype ", dtype_name(a.t),
                 " (expected bf16 or f32)");
  LOOM_ARG_CHECK(a.smem_skew >= 0 && a.smem_skew % 16 == 0 && a.smem_skew <= 16384,
                 "megakernel: smem_skew ", a.smem_skew, " (expected a multiple of 16 in 0..16384)");
  LOOM_ARG_CHECK(a.gemv_stages >= 2 && a.gemv_stages <= kGemvMaxStages,
                 "megakernel: ", a.gemv_stages, " weight ring stages (expected 2..", kGemvMaxStages,
                 ")");
  LOOM_ARG_CHECK(a.attn_min_keys >= kMegaMinPartitionKeys &&
                     a.attn_min_keys <= kMegaPartitionKeys &&
                     (a.attn_min_keys & (a.attn_min_keys - 1)) == 0,
                 "megakernel: attn_min_keys ", a.attn_min_keys, " (expected a power of two in ",
                 kMegaMinPartitionKeys, "..", kMegaPartitionKeys, ")");
  LOOM_ARG_CHECK(a.block_size > 0 &&
                     uint64_t(a.bt_stride) * a.block_size * a.block_size <= (uint64_t(1) << 32),
                 "megakernel: ", a.bt_stride, " blocks of ", a.block_size,
                 " keys a sequence (a key's block by FastDiv needs keys · block_size < 2^32)");
  const int G = a.d.group_size(),
            reduce_floats = (a.max_parts * G + 3) / 4 * 4 + mega_partial_floats(G, a.d.head_dim);
  LOOM_ARG_CHECK(reduce_floats <= int(attn_bytes(a.d, a.t) / 4), "megakernel: ", a.max_parts,
                 " attention partitions a (slot, KV head) need ", 4 * reduce_floats,
                 " bytes of AttnReduce's shared memory (", attn_bytes(a.d, a.t), " there)");
  LOOM_ARG_CHECK(!a.attn_in_xs || mega_attn_in_xs(a.d, a.t), "megakernel: attn_in_xs, yet ",
                 "attention's ", attn_bytes(a.d, a.t), " bytes exceed the staged input's ",
                 mega_xs_bytes(a.d, dtype_size(a.t)));
  LOOM_ARG_CHECK(!a.gemv_mma || mega_gemv_mma(a.d, a.t), "megakernel: tensor-core GEMVs asked for ",
                 "batch ", a.d.batch, " (expected bf16, 4-8 slots, every k a multiple of ",
                 kMmaKParts * 64, ", tiles of multiples of 16 rows, at most ", kMegaMaxTmaps,
                 " weight maps)");
  LOOM_ARG_CHECK(!a.gemv_mma || (a.tmaps != nullptr && a.smem_skew % kMegaMmaAlign == 0),
                 "megakernel: tensor-core GEMVs without their weights' maps, or smem_skew ",
                 a.smem_skew, " off their ", kMegaMmaAlign, "-byte alignment");
  LOOM_ARG_CHECK(!a.gemv_mma || (attn_groups_smem_bytes(G, a.d.head_dim) <= attn_bytes(a.d, a.t) &&
                                 a.max_parts >= kAttnGroups * a.d.attn_splits),
                 "megakernel: the attention groups' ", attn_groups_smem_bytes(G, a.d.head_dim),
                 " bytes of shared memory (", attn_bytes(a.d, a.t), " there) or ", a.max_parts,
                 " partial slots a (slot, KV head) (expected ", kAttnGroups * a.d.attn_splits, ")");
  LOOM_ARG_CHECK(a.d.rows_per_tile % 16 == 0, "megakernel: rows_per_tile ", a.d.rows_per_tile,
                 " (expected a multiple of 16: GateUp's tiles are 8-row gate / up pairs)");
  LOOM_ARG_CHECK(a.t != DType::BF16 || attn_mma_fits(G, a.d.head_dim), "megakernel: attention of ",
                 G, " heads a KV head at head_dim ", a.d.head_dim,
                 " on the tensor cores (expected at most 16 heads, head_dim a multiple of 16 up "
                 "to 128)");
  if (a.t == DType::BF16)
    return a.gemv_mma ? dispatch_batch<bf16, true>(a, stream)
                      : dispatch_batch<bf16, false>(a, stream);
  return dispatch_batch<float, false>(a, stream);
}

}  // namespace loom::mega
