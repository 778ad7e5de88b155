// The positions family's reference (kernels/positions.h) against hand-computed values. A header
// of test cases: tests/test_ops_ref.cpp runs it in every build, tests/cuda/ops/test_positions.cpp
// beside the kernel checks.
#pragma once

#include <doctest/doctest.h>

#include <vector>

#include "kernels/positions.h"

TEST_CASE("cpu::add_absolute_positions gives fixed values (offset 2, a row outside the table)") {
  using namespace loom;
  // Table rows 10, 20, 30, 40 (hidden 1); offset 2: positions 0 and 1 read rows 2 and 3;
  // position 5 would read row 7, outside the table, and leaves x alone.
  const std::vector<float> table = {10, 20, 30, 40};
  const std::vector<int32_t> positions = {0, 1, 5};
  std::vector<float> x = {1, 1, 1};
  PositionsArgs a;
  a.x = x.data();
  a.positions = positions.data();
  a.table = table.data();
  a.offset = 2;
  a.table_rows = 4;
  a.n_slots = 3;
  a.hidden = 1;
  cpu::add_absolute_positions(a);
  CHECK(x == std::vector<float>{31, 41, 1});
}
