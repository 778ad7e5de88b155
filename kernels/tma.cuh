// The tensor-memory accelerator (TMA, sm_90) for kernels that stream tiles into shared memory:
// the host side encodes a tensor map (cuTensorMapEncodeTiled, reached through the runtime's
// driver entry point, so nothing links libcuda), the device side issues box copies that
// complete on an mbarrier in shared memory. Included by .cu files only.
//
// Ordering, as the PTX ISA states it: a copy's bytes are visible to the threads that observe
// its mbarrier phase complete (mbar_wait). Shared memory that ordinary stores wrote and a later
// copy overwrites needs fence_proxy_async() in the writing threads first.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "kernels/common.cuh"

namespace loom::gpu {

// ---- host ------------------------------------------------------------------------------------

// A rank-3 tiled tensor map over `base`: dims[0] contiguous, strides (bytes) of dims 1 and 2,
// one box of box[0..2] elements a copy, the given swizzle and L2 promotion. An error names the
// map and the driver's code.
inline Status encode_tensor_map_3d(CUtensorMap& map, const void* base, CUtensorMapDataType type,
                                   const uint64_t (&dims)[3], const uint64_t (&strides)[2],
                                   const uint32_t (&box)[3], CUtensorMapSwizzle swizzle,
                                   CUtensorMapL2promotion promotion, const char* what) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                           cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || fn == nullptr)
      return Status::bad(
          cat(what, ": the driver has no cuTensorMapEncodeTiled (", cudaGetErrorString(e), ")"));
    encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r =
      encode(&map, type, 3, const_cast<void*>(base), dims, strides, box, elem_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::bad(cat(what, ": cuTensorMapEncodeTiled failed (CUresult ", int(r), ")"));
  return Status::good();
}

// ---- device ----------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint64_t* bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals)
               : "memory");
}

// Makes mbar_init visible to the async proxy (the copies that complete on the barrier).
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Orders this thread's earlier ordinary shared-memory accesses before later async-proxy ones.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Orders this thread's earlier generic-proxy accesses, to global memory (what it acquired from
// other threads' stores included) and to shared memory, before its later async-proxy ones.
__device__ __forceinline__ void fence_proxy_async_all() {
  asm volatile("fence.proxy.async.global;\n\tfence.proxy.async.shared::cta;" ::: "memory");
}

// One arrival that also expects `bytes` of copies in the current phase.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}

// Spins until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t b = smem_u32(bar);
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(b), "r"(parity)
        : "memory");
}

// One arrival (no transaction bytes).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// One bulk copy global → shared of `bytes` (a multiple of 16, both addresses 16-aligned; no
// tensor map), completing `bar`'s transaction count.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];" ::"r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}

// An L2 cache policy for bulk copies: evict_first (data read once, as streamed weights: the L2
// keeps what is read again — activations, counters, norms, KV — in their place) or evict_normal.
__device__ __forceinline__ uint64_t l2_policy(bool evict_first) {
  uint64_t p;
  if (evict_first)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  else
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// bulk_load under an L2 cache policy (l2_policy).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                          uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
      "[%1], %2, [%3], %4;" ::"r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}

// One box of a rank-3 tensor map at element coordinates (c0, c1, c2) into shared memory dst,
// completing `bar`'s transaction count.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4}], [%5];" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}
// tma_load_3d under an L2 cache policy (l2_policy).
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar)),
      "l"(policy)
      : "memory");
}

}  // namespace loom::gpu
