// Learned absolute positions (OPT, GPT-2), its argument struct and fp32 host reference (the
// CUDA launcher: positions.cuh). Plain C++, so the CPU backend and CPU-only builds include it.
//   x[slot, :] += table[positions[slot] + offset, :]
// after embed_assemble (embed.h) has written the token embedding, the order in which HF adds
// them. x and the table are fp32. OPT's table has max_positions + 2 rows and position p reads
// row p + 2 (offset 2). A row outside the table is skipped (the caller checks positions against
// max_positions; a padded decode slot reads position 0).
#pragma once

#include <cstdint>

namespace loom {

struct PositionsArgs {
  float* x = nullptr;                  // [n_slots, hidden] fp32, in place
  const int32_t* positions = nullptr;  // [n_slots]
  const float* table = nullptr;        // [table_rows, hidden] fp32
  int offset = 0;                      // row of position 0
  int table_rows = 0, n_slots = 0, hidden = 0;
};

namespace cpu {

// The reference (one fp32 add per element, as the kernel). The CPU backend runs it.
void add_absolute_positions(const PositionsArgs& a);

}  // namespace cpu
}  // namespace loom
