// cuda_bench's attention microbenchmarks (bench_attention.cpp): tensor-core vs CUDA-core
// paged attention, decode and prefill, on Terra's heads.
#pragma once

#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

namespace loom {

nlohmann::json attention_mma_bench(cudaStream_t stream, int sms);

}  // namespace loom
