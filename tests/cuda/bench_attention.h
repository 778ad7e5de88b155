// cuda_bench's attention microbenchmarks (bench_attention.cpp): tensor-core vs CUDA-core
// paged attention, decode and prefill, on Terra's heads.
#pragma once

#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

namespace loom {

nlohmann::json attention_mma_bench(cudaStream_t stream, int sms);
// One decode case of attention_mma_bench (batch sequences at context ctx), for profilers, with
// kv_heads kv heads of 8 q heads each (Terra: 4). With 1, a cache block's 16 keys of a head are
// 2 KB contiguous instead of 16 rows of 128 bytes 512 bytes apart: the layout's cost.
// fp8: the cache holds e4m3 (GB/s of the bytes read, half of bf16's). block_size: KV slots a
// cache block (64: one TMA box a 64-key tile, 16: four).
nlohmann::json attention_decode_case(cudaStream_t stream, int sms, int batch, int ctx, int kv_heads,
                                     bool fp8 = false, int block_size = 16);
// Decode attention of `batch` sequences on one stream beside Terra's four layer GEMMs at m =
// batch on another: each alone, at once, one after the other (the two-half-batch question).
nlohmann::json attention_overlap_case(cudaStream_t stream, int batch, int ctx, bool fp8);
// `layers` layers of decode attention and the four layer GEMMs at `batch` sequences: serial (one
// stream) against two half-batch groups on two streams, half a layer apart (cuda_bench
// --pipeline-case): whether one group's attention runs beside the other's GEMMs; with power,
// serial and pipelined sustained for ~3 s each with NVML's joules.
nlohmann::json attention_pipeline_case(cudaStream_t stream, int batch, int ctx, bool fp8,
                                       int layers, bool power = false);
// The prefill kernel on `seqs` sequences prefilling `slots` slots from the start, at each ring
// depth (AttentionArgs::prefill_stages 2-4) and both register builds (prefill_blocks_per_sm 0, 3),
// twice, its bits compared with the first run's.
nlohmann::json attention_prefill_case(cudaStream_t stream, int slots, int seqs, bool fp8);
// The TMA decode kernel with groups of `group` sequences sharing their first `shared` keys'
// blocks against each with its own, in each TMA config (cuda_bench --shared-case).
nlohmann::json attention_shared_case(cudaStream_t stream, int batch, int ctx, int group, int shared,
                                     bool fp8);

}  // namespace loom
