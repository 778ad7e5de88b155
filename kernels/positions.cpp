// fp32 reference of add_absolute_positions (positions.h).
#include "kernels/positions.h"

#include <cstddef>

namespace loom::cpu {

void add_absolute_positions(const PositionsArgs& a) {
  const size_t H = size_t(a.hidden);
  for (int s = 0; s < a.n_slots; s++) {
    const int row = a.positions[s] + a.offset;
    if (row < 0 || row >= a.table_rows) continue;
    const float* p = a.table + size_t(row) * H;
    float* x = a.x + size_t(s) * H;
    for (size_t h = 0; h < H; h++) x[h] += p[h];
  }
}

}  // namespace loom::cpu
