// Token sampling on the device over the whole vocabulary (262,145 for Terra), giving the same
// token as loom::sample_token (backend/sampler.h) for the same logits:
//   greedy: argmax, lowest id on ties;
//   top-p on: the inverse CDF over the kept prefix's fixed-point weights (draw stream 4,
//   core/top_p_weight.h), drawn by the filter from the sums that find the cut;
//   otherwise Gumbel-max over the kept set: argmax of z[i] - log(-log(u[i])), z = logits / T,
//   u[i] = philox_uniform(seed, sample_index, draw_index, i).
// The kept set of top-k / top-p is a prefix of the order (z descending by its key, id
// ascending), so it is described by a key threshold and a tie cut: kept(i) = key(i) > thr ||
// (key(i) == thr && i <= id_cut), key = the order-preserving bits of z. The cut is found from
// count (top-k) or probability-mass (top-p) histograms (kernels/sample_select.cuh), refined only
// until the boundary bin holds at most 4,096 elements, which are then sorted and summed in order;
// a 4-pass radix select with an ordered tie scan in id order where more ties share one key.
// Masses are the CPU definition's integers (core/top_p_weight.h), so every sum is exact.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

// Per logits row; the same layout on host and device.
struct SampleParamsDev {
  uint64_t seed = 0;
  uint64_t draw_index = 0;
  float temperature = 1.0f;  // <= 0: greedy
  float top_p = 1.0f;        // >= 1: off
  int32_t top_k = 0;         // <= 0 or >= vocab: off
  uint32_t sample_index = 0;
  int32_t active = 0;  // 0: write -1
  int32_t pad = 0;
};
static_assert(sizeof(SampleParamsDev) == 40, "SampleParamsDev layout is shared with the host");

constexpr int kSampleChunks = 32;  // blocks per row in the draw
// The largest vocabulary the device draw takes (a chunk's v-hat in the draw block's 160 KB of
// shared memory, kernels/sampling.cu); the CUDA backend refuses a larger model at load.
constexpr int kSampleMaxVocab = 1310720;
constexpr int kSampleList = 1024;  // kept ids a row's filter may list (top-k <= this)

// A row's kept set as the filter leaves it, the first n_rows entries of the workspace: id i
// with key(z_i) > thr, or key(z_i) == thr and i <= id_cut (key: z's bits mapped monotonically to
// uint32, negative floats inverted, positive ones with the sign bit set); {0, INT_MAX} keeps
// every id. Read by the draw, and by the tests.
struct SampleFilter {
  uint32_t thr;    // key threshold
  int32_t id_cut;  // ties at thr kept up to this id
  int32_t listed;  // > 0: the kept set is these ids of the row's list (top-k <= kSampleList)
  int32_t drawn;   // >= 0: the row's token, drawn by the filter (top-p, draw stream 4); else -1
};
static_assert(sizeof(SampleFilter) == 16, "sample_workspace_bytes counts 16 bytes a filter");

// Bytes of device workspace for n_rows rows, in this order: n_rows filters, kSampleChunks partials
// (8 bytes) a row, a list of kSampleList kept ids (int32) a row.
inline size_t sample_workspace_bytes(int n_rows) {
  return size_t(n_rows) * (16 + kSampleChunks * 8 + kSampleList * 4);
}

// tokens[r] = the draw for logits row r (t = F32 or BF16, [n_rows, ld], the first vocab entries
// of a row), -1 where params[r].active == 0. bf16 logits are widened exactly, so they draw what
// their fp32 copies would. pdl: the first kernel may start while the previous kernel on the
// stream (which must be a kernel, e.g. the lm_head GEMV) finishes; it waits before reading.
Status sample_tokens(DType t, const void* logits, int n_rows, int vocab, int ld,
                     const SampleParamsDev* params, void* workspace, int32_t* tokens,
                     cudaStream_t stream, bool pdl = false);

}  // namespace loom::gpu
