#include "kernels/common.cuh"
#include "kernels/positions.cuh"

namespace loom::gpu {

__global__ void add_absolute_positions_kernel(float* x, const int32_t* positions,
                                              const float* table, int offset, int table_rows,
                                              int hidden) {
  const int slot = blockIdx.x;
  const int row = positions[slot] + offset;
  // The host checks positions against max_positions; a row outside the table (a padded decode
  // slot reads position 0) is never read out of bounds.
  if (row < 0 || row >= table_rows) return;
  const float* p = table + size_t(row) * hidden;
  float* xs = x + size_t(slot) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) xs[i] = __fadd_rn(xs[i], p[i]);
}

Status add_absolute_positions(const PositionsArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.n_slots >= 0 && a.hidden > 0 && a.table_rows > 0 && a.offset >= 0,
                 "add_absolute_positions: n_slots ", a.n_slots, ", hidden ", a.hidden, ", rows ",
                 a.table_rows, ", offset ", a.offset);
  LOOM_ARG_CHECK(a.x && a.positions && a.table, "add_absolute_positions: null pointer");
  if (a.n_slots == 0) return Status::good();
  add_absolute_positions_kernel<<<a.n_slots, 128, 0, stream>>>(a.x, a.positions, a.table, a.offset,
                                                               a.table_rows, a.hidden);
  return launch_status("add_absolute_positions");
}

}  // namespace loom::gpu
