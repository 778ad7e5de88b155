// smem_for_blocks_per_sm (kernels/attention_mma.cuh), which the decode attention kernels use to
// hold themselves to 2 resident blocks an SM: for a block that asks for little shared memory,
// the padded request gives exactly `cap` resident blocks in the device's own occupancy
// calculator, for every cap that threads and registers allow; cap 0 and a request already past
// the cap's share stay as they are.
#include <doctest/doctest.h>

#include "kernels/attention_mma.cuh"
#include "kernels/cuda_check.cuh"

using namespace loom::gpu::mma_impl;

__global__ void block_cap_probe(int* out) {
  extern __shared__ int smem[];
  smem[threadIdx.x] = int(threadIdx.x);
  __syncthreads();
  if (out != nullptr) out[threadIdx.x] = smem[threadIdx.x];
}

static int resident(int bytes) {
  LOOM_CUDA_CHECK(
      cudaFuncSetAttribute(block_cap_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  int per_sm = 0;
  LOOM_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, block_cap_probe, 128, size_t(bytes)));
  return per_sm;
}

TEST_CASE("smem_for_blocks_per_sm pads a request to exactly cap resident blocks an SM") {
  REQUIRE(smem_per_sm_bytes() > 0);
  const int small = 16 * 1024;  // 16 KB: ~14 fit an H100/H200 SM (228 KB), threads allow 16
  REQUIRE(resident(small) > 4);
  CHECK(smem_for_blocks_per_sm(small, 0) == small);
  for (int cap : {1, 2, 3, 4}) {
    CAPTURE(cap);
    const int bytes = smem_for_blocks_per_sm(small, cap);
    CHECK(bytes % 16 == 0);
    CHECK(resident(bytes) == cap);
    CHECK(resident(bytes - 1024) > cap);  // within 1 KB of the smallest such request
  }
  // Past the share already (one block of 150 KB fits one an SM): unchanged.
  CHECK(smem_for_blocks_per_sm(150 * 1024, 2) == 150 * 1024);
}
