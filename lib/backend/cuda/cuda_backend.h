// The CUDA backend (design §6): bf16 weights (fp32 selectable) on one GPU, cuBLAS GEMMs and
// fused weight-streaming GEMVs, kernels from kernels/, a paged KV pool, decode steps replayed
// from CUDA graphs per batch-size bucket. loom reaches make_cuda_backend through the module's
// entry point (module_entry.cpp, backend/module.h); the CUDA suites and cuda_bench link it
// directly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
// the forward pass. Bits: 1 rope + attention, 2 the four layer GEMVs/GEMMs, 4 lm_head + draw,
// 8 the norms and activations (rms_norm incl. the final one, silu_mul, bias_activation), 16 the
// draw alone, 32 / 64 / 128 / 256 the qkv / o / gate_up (or up) / down GEMMs alone; 512 runs
// every layer's attention over layer 0's KV cache (what a layer's fresh cache region costs);
// 1024 launches RoPE and attention without programmatic dependent launch; 2048 lets as many
// TMA decode blocks be resident an SM as fit (AttentionArgs::tma_blocks_per_sm 0); 4096 caps
// the split decode kernel at 1 block an SM, 8192 lets as many as fit (split_blocks_per_sm);
// 32768 runs every TMA decode pair whole past one wave (AttentionArgs::tma_chunk_tail false).
void cuda_set_debug_skip(Backend& backend, int mask);

// The decode-step megakernel (kernels/mega, issue 15) for decode steps of 1-8 sequences:
// Auto takes it in bf16 where the model, the KV dtype and the draws allow (the graph path
// otherwise); Off (the default: it is slower than the graph path so far, bench/NOTES-cuda.md)
// never; Force also in f32 (the exact comparison with the CPU backend).
enum class MegakernelMode { Auto, Off, Force };
void cuda_set_megakernel(Backend& backend, MegakernelMode mode);
// Decode steps that ran the megakernel so far.
int64_t cuda_megakernel_steps(const Backend& backend);
// Steps with short chunks (a frame's action chunk) that ran from a graph so far.
int64_t cuda_chunk_graph_steps(const Backend& backend);
// Steps whose decoding sequences share cache blocks on a bf16 cache so far (their TMA decode
// past one wave of 2-stage blocks takes one stage a warp: kernels/attention_tma.cu).
int64_t cuda_shared_kv_steps(const Backend& backend);
// Of those, steps whose shared prefixes are a third of the contexts or more (group blocks).
int64_t cuda_group_kv_steps(const Backend& backend);
// Why the loaded model cannot take the megakernel ("" when it can).
std::string cuda_megakernel_refusal(const Backend& backend);
// Tests: jitter_seed != 0 sleeps 0-4 us at every wait and publish; permute_seed != 0 hands the
// SMs' programs to the CTAs in a random order; timeout_ns bounds every wait; drop_unit drops
// the last unit of the first multi-unit instruction of the qkv op of layer 0 (a schedule
// defect: its consumers never start, so the step must fail, not hang).
struct MegakernelDebug {
  uint32_t jitter_seed = 0;
  uint64_t permute_seed = 0;
  uint64_t timeout_ns = 2000000000ull;
  bool drop_unit = false;
  bool trace = false;     // per-phase timing of every megakernel step (each step then synchronises)
  int rows_per_tile = 0;  // layer GEMV rows a unit (MegaOptions; 0: the backend's choice)
  int attn_splits = 0;    // attention splits a (slot, KV head) (MegaOptions; 0: the backend's)
  int reduce_chunk = 0;   // MegaArgs::reduce_chunk (0: as many partitions as fit)
  int attn_min_keys = 0;  // MegaArgs::attn_min_keys, 32-256 (0: the backend's choice)
  int attn_apart = 0;     // MegaArgs::attn_apart: 1 off, 2 on where it fits (0: the backend's)
  int gemv_early = 0;     // MegaArgs::gemv_early (0: the backend's choice)
  int gemv_early_down = 0;  // MegaArgs::gemv_early_down (0: the backend's choice)
  int gemv_ahead = 0;       // MegaArgs::gemv_ahead: 1 off, 2 on (0: the backend's choice)
  int weights_evict = 0;    // MegaArgs::weights_evict_first: 1 off, 2 on (0: the backend's)
  int gemv_inflight = 0;    // MegaArgs::gemv_inflight (0: the backend's choice)
  int gemv_mma = 0;         // MegaArgs::gemv_mma: 1 off, 2 on where it fits (0: the backend's)
  int skip_math = 0;  // benchmarks only, wrong tokens: 1 MegaArgs::skip_math, 2 skip_waits, 3 both
  int smem_skew = 0;  // benchmarks only: MegaArgs::smem_skew, a multiple of 16
};
void cuda_set_megakernel_debug(Backend& backend, const MegakernelDebug& debug);

// Where the traced megakernel steps' time went (MegakernelDebug::trace), per op: the mean over
// steps and CTAs of the time a CTA spent working on the op's units (busy) and waiting for their
// inputs (wait); step_us is the mean span of a step (first start to last end over the CTAs).
struct MegakernelPhase {
  std::string op;
  double busy_us = 0, wait_us = 0;
  double stage_us = 0;  // GEMVs: the part of busy_us staging the input (norm, silu, copy)
  // Along the step's chain of ops (embed, per layer qkv → attn_partial (+ its reduce) → o_proj →
  // gate_up → down, final_norm, lm_head, draw), means over layers: span, from the previous op's
  // last unit to this op's last unit (the spans add up to the step); lag, from the previous
  // op's last unit to the first CTA that has this op's input staged (GEMVs; the hop and the
  // staging on the critical path).
  double span_us = 0, lag_us = 0;
  double slowest_us = 0;  // busy_us of the CTA whose program took longest (each step's)
  // A layer's most loaded CTA for this op (its busy µs on the op's instructions of one layer,
  // the max over CTAs, a mean over layers): against busy_us / layers, the op's imbalance.
  double busiest_us = 0;
};
struct MegakernelTrace {
  int64_t steps = 0;
  double step_us = 0;
  // A CTA's program: its instructions' time less its waits, the mean over the CTAs and the
  // longest (means over steps); the longest bounds the step when nothing waits.
  double cta_mean_us = 0, cta_max_us = 0;
  std::vector<MegakernelPhase> phases;  // in forward order
  // The last traced step instruction by instruction (µs from its first start; staged_us < 0:
  // not a GEMV): the raw timeline behind the means, for offline critical-path analysis.
  struct Row {
    int cta = 0, op = 0, layer = 0;
    double start_us = 0, wait_us = 0, staged_us = -1, end_us = 0;
  };
  std::vector<Row> last_step;
};
MegakernelTrace cuda_megakernel_trace(const Backend& backend);

// Number of CUDA devices, 0 when none or when the driver is unusable; *reason says why.
int cuda_device_count(std::string* reason);

}  // namespace loom
