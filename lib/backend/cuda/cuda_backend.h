// The CUDA backend (design §6): bf16 weights (fp32 selectable) on one GPU, cuBLAS GEMMs and
// fused weight-streaming GEMVs, kernels from kernels/, a paged KV pool, decode steps replayed
// from CUDA graphs per batch-size bucket. loom reaches make_cuda_backend through the module's
// entry point (module_entry.cpp, backend/module.h); the CUDA suites and cuda_bench link it
// directly.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace loom {

// Throws loom::Error when no CUDA device is usable (message says why), or when batch_invariant
// is asked for in f32 (the fixed-order linear layers, kernels/linear_fixed.cuh, are bf16).
std::unique_ptr<Backend> make_cuda_backend(ComputeDType dtype, int device,
                                           bool batch_invariant = false);

// Benchmarks without a checkpoint: uploads random weights of spec's shapes generated on the
// device (uniform, scaled so activations stay finite). `backend` must come from
// make_cuda_backend.
void cuda_load_random_weights(Backend& backend, const ModelSpec& spec, uint64_t seed);

// Fills the allocated KV pool with random values (benchmarks that decode at a long context
// without prefilling it).
void cuda_fill_cache_random(Backend& backend, uint64_t seed);

// Seconds the last load() took (weights on the device, synchronised).
double cuda_last_load_seconds(const Backend& backend);

// GPU time of one decode step alone: replays the CUDA graph of the bucket that holds n_seqs
// (captured by an earlier step() of that size, whose inputs it reuses) `iters` times back to
// back between events; milliseconds per replay. No host work is included.
double cuda_time_graph_replay(Backend& backend, int n_seqs, int iters);

// Benchmark decomposition only (results are garbage while set): leave kernel families out of
// the forward pass. Bits: 1 rope + attention, 2 the four layer GEMVs/GEMMs, 4 lm_head + draw.
void cuda_set_debug_skip(Backend& backend, int mask);

// Number of CUDA devices, 0 when none or when the driver is unusable; *reason says why.
int cuda_device_count(std::string* reason);

}  // namespace loom
