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

#include "kernels/mega/attention_ops.cuh"
#include "kernels/mega/gemv_ops.cuh"
#include "kernels/mega/megakernel.cuh"

namespace loom::mega {

template <class T, int M, bool kMma>
__global__ void __launch_bounds__(kMegaThreads, 1) megakernel(const MegaArgs a) {
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
  char* dyn = reinterpret_cast<char*>(mega_smem) + (kMegaAlign - base % kMegaAlign) % kMegaAlign +
              a.smem_skew;
  T* xs = reinterpret_cast<T*>(dyn);  // staged GEMV input, then the weight ring
  char* ring = dyn + mega_xs_bytes(a.d, sizeof(T));
  const int prog_end = a.prog_begin[prog + 1];
  WeightStream ws;  // this warp's weight segments (gemv_ops.cuh)
  if ((threadIdx.x & 31) == 0) {
    for (int s = 0; s < a.gemv_stages; s++) loom::gpu::mbar_init(&sh.bar[threadIdx.x >> 5][s], 1);
    WeightCursor& cur = sh.cursor[threadIdx.x >> 5];
    cur.issued = 0, cur.pc = a.prog_begin[prog], cur.it = -1;
  }
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
    const uint64_t t0 = c.trace && threadIdx.x == 0 ? global_ns() : 0;
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
      e.start = t0;
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
  return t == DType::BF16 ? attn_smem_bytes<bf16>(d.group_size(), d.head_dim)
                          : attn_smem_bytes<float>(d.group_size(), d.head_dim);
}

bool mega_gemv_mma(const MegaDims& d, DType t) {
  return t == DType::BF16 && d.batch >= 4 && mega_mma_fits(d.hidden) && mega_mma_fits(d.q_dim()) &&
         mega_mma_fits(d.intermediate) && d.rows_per_tile % 16 == 0 && d.lm_rows_per_tile % 16 == 0;
}

size_t mega_smem_bytes(const MegaDims& d, DType t, int gemv_stages, bool attn_apart, bool mma) {
  const size_t elt = dtype_size(t);
  const size_t gemv = mega_xs_bytes(d, elt) + size_t(kMegaWarps) * gemv_stages * kGemvSegBytes +
                      (mma ? kMmaPartBytes : 0);
  return kMegaAlign + (attn_apart ? gemv + attn_bytes(d, t) : std::max(gemv, attn_bytes(d, t)));
}

bool mega_attn_in_xs(const MegaDims& d, DType t) {
  return attn_bytes(d, t) <= mega_xs_bytes(d, dtype_size(t));
}

int mega_gemv_stages(const MegaDims& d, DType t, int smem_optin, bool attn_apart, bool mma) {
  for (int s = kGemvMaxStages; s >= 2; s--)
    if (mega_smem_bytes(d, t, s, attn_apart, mma) + sizeof(MegaShared) + 1024 <= size_t(smem_optin))
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
  const cudaError_t e = cudaLaunchKernelEx(&cfg, megakernel<T, M, kMma>, a);
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
                 kMmaKParts * 32, ", tiles of multiples of 16 rows)");
  if (a.t == DType::BF16)
    return a.gemv_mma ? dispatch_batch<bf16, true>(a, stream)
                      : dispatch_batch<bf16, false>(a, stream);
  return dispatch_batch<float, false>(a, stream);
}

}  // namespace loom::mega
