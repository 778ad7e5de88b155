// What a step's extra rows cost the layer GEMMs: Terra's 22 layers of qkv, o, gate_up and down
// through cuBLAS (gpu::Gemm, as the forward pass calls it) at m rows, captured as one graph and
// replayed. A 256-sequence decode step is 256 rows; a step where k sequences feed a frame's 6
// action slots is 256 + 6k (39% of the 256 x 22 run's steps), and a 128-row tile's worth of
// MMAs for 6 rows costs time at full clock and energy under the 700 W cap. Each layer has its own
// weights (1.9 GB in all, past L2), so a replay streams them as a step does.
// power: each m's graph replayed for ~8 s, the window's wall-clock bounds in the JSON for
// scripts/power_windows.py (nvidia-smi's samples: joules a replay).
#include <algorithm>
#include <cstdio>

#include "bench.h"
#include "kernels/activation.cuh"
#include "kernels/cuda_check.cuh"

namespace loom::bench {

using json = nlohmann::json;

namespace {

constexpr int kLayers = 22, kHidden = 2048, kInter = 5632, kQkv = 2560;

// Median ms of one replay of g over `iters`.
double replay_ms(cudaGraphExec_t g, cudaStream_t s, int iters) {
  return graph_replays_ms(g, s, iters)[size_t(iters / 2)];
}

}  // namespace

json bench_gemm_rows(const Context& c, const std::vector<int>& rows, bool power) {
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {{"qkv", kQkv, kHidden},
                          {"o", kHidden, kHidden},
                          {"gate_up", 2 * kInter, kHidden},
                          {"down", kHidden, kInter}};
  Buffers b;
  // w[layer][gemm]: [n, k] bf16, random (constant weights draw less power than real ones).
  std::vector<void*> w;
  double params = 0;
  for (int l = 0; l < kLayers; l++)
    for (const Shape& s : shapes) {
      const size_t n = size_t(s.n) * s.k;
      w.push_back(b.alloc(n * 2));
      LOOM_KERNEL(
          gpu::fill_uniform(DType::BF16, w.back(), n, uint64_t(7 + w.size()), 0.05f, nullptr));
      params += double(n);
    }
  const int max_m = *std::max_element(rows.begin(), rows.end());
  void* x = b.alloc(size_t(max_m) * kInter * 2);      // [m, ≤ 5632] bf16: every GEMM's input
  void* y = b.alloc(size_t(max_m) * 2 * kInter * 2);  // [m, ≤ 11264] bf16
  LOOM_KERNEL(gpu::fill_uniform(DType::BF16, x, size_t(max_m) * kInter, 5, 1.0f, nullptr));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("\nlayer GEMMs, %d layers (%.2f GB of bf16 weights), one graph a row count:\n",
              kLayers, 2 * params / 1e9);
  json out = json::array();
  for (int m : rows) {
    auto chain = [&] {
      for (int l = 0; l < kLayers; l++)
        for (int i = 0; i < 4; i++)
          c.gemm->run(DType::BF16, x, w[size_t(4 * l + i)], DType::BF16, y, m, shapes[i].n,
                      shapes[i].k);
    };
    chain();  // eager once, outside the capture (cuBLAS's first calls at a shape)
    LOOM_CUDA_CHECK(cudaStreamSynchronize(c.stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    chain();
    LOOM_CUDA_CHECK(cudaStreamEndCapture(c.stream, &graph));
    LOOM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double ms = replay_ms(exec, c.stream, 20);
    const double tflops = 2.0 * m * params / (ms * 1e-3) / 1e12;
    json row = {{"m", m}, {"ms", ms}, {"tflops", tflops}, {"weight_bytes", 2 * params}};
    std::printf("m %4d: %.3f ms a replay (%.0f TFLOP/s of the m rows, %.0f GB/s of weights)\n", m,
                ms, tflops, 2 * params / (ms * 1e-3) / 1e9);
    if (power) {
      const double t0 = wall_s();
      const double got = replay_ms(exec, c.stream, int(8000 / ms));
      const double t1 = wall_s();
      row["power_windows"].push_back(
          {{"what", "m=" + std::to_string(m)}, {"t0", t0}, {"t1", t1}, {"ms", got}});
      std::printf("power window m %d: %.3f .. %.3f s (%.3f ms a replay)\n", m, t0, t1, got);
    }
    out.push_back(row);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  return out;
}

}  // namespace loom::bench
