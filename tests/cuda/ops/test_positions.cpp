// The positions family (kernels/positions.h): add_absolute_positions against its reference over
// odd widths (1, 3, 19, 99, 2053), offsets 0 and 2 and a position outside the table (skipped),
// exactly (one fp32 add per element on both sides). The reference's fixed values:
// ops/positions_ref.h.
#include <doctest/doctest.h>

#include "cuda/cuda_test_util.h"
#include "kernels/positions.cuh"
#include "ops/positions_ref.h"

using namespace loom;
using namespace loom::test;

TEST_CASE("add_absolute_positions matches cpu::add_absolute_positions bit for bit") {
  for (int hidden : {1, 3, 19, 99, 2053})
    for (int offset : {0, 2}) {
      CAPTURE(hidden);
      CAPTURE(offset);
      const int rows = 24, n_slots = 19;
      const std::vector<float> table = random_vec(size_t(rows) * hidden, 41);
      const std::vector<float> x = random_vec(size_t(n_slots) * hidden, 42);
      std::vector<int32_t> pos(static_cast<size_t>(n_slots));
      for (int i = 0; i < n_slots; i++) pos[size_t(i)] = (i * 7) % (rows - offset);
      pos[5] = rows;  // outside the table: x keeps its row
      std::vector<float> ref = x;
      cpu::add_absolute_positions(
          {ref.data(), pos.data(), table.data(), offset, rows, n_slots, hidden});
      CHECK(ref[5 * size_t(hidden)] == x[5 * size_t(hidden)]);
      DevBuf dx = upload(x, DType::F32), dt = upload(table, DType::F32), dp = upload_ints(pos);
      LOOM_KERNEL(gpu::add_absolute_positions(
          {dx.as<float>(), dp.as<int32_t>(), dt.as<float>(), offset, rows, n_slots, hidden},
          nullptr));
      CHECK(download(dx, ref.size(), DType::F32) == ref);
    }
}
