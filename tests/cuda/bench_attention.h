// cuda_bench's attention microbenchmarks (bench_attention.cpp): tensor-core vs CUDA-core
// paged attention, decode and prefill, on Terra's heads.
#pragma once

#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

namespace loom {

nlohmann::json attention_mma_bench(cudaStream_t stream, int sms);
// One decode case of attention_mma_bench (batch sequences at context ctx), for profilers.
nlohmann::json attention_decode_case(cudaStream_t stream, int sms, int batch, int ctx);

}  // namespace loom
