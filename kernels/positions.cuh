// Learned absolute positions (OPT, GPT-2): x[slot, :] += table[positions[slot] + offset, :]
// after embed_assemble (embed.cuh) has written the token embedding, the order in which
// cpu_backend adds them. x and the table are fp32. OPT's table has max_positions + 2 rows and
// position p reads row p + 2 (offset 2). Launch: one block per slot, 128 threads.
#pragma once

#include <cstdint>

#include "kernels/cuda_check.cuh"

namespace loom::gpu {

Status add_absolute_positions(float* x, const int32_t* positions, const float* table, int offset,
                              int table_rows, int n_slots, int hidden, cudaStream_t stream);

}  // namespace loom::gpu
