// The sampling family (kernels/sampling.cuh) at Terra's vocabulary (262,145): sample_tokens at 1
// and 256 rows for greedy, the benchmark sampler (temperature, no filter), top-k, top-p and
// both, on logits drawn N(0, sigma) for a narrow (sigma 1, like the random checkpoint's) and a
// wide (sigma 4) spread, as fp32 logits and as the bf16 ones the decode step's lm_head GEMM
// writes (the draw reads them as they are). Each case first checks 16 rows' tokens against the host
// sampler (backend/sampler.h), then times the whole call (L2 flushed) and prints microseconds a
// step.
#include <cstdio>
#include <random>

#include "backend/sampler.h"
#include "bench.h"
#include "kernels/sampling.cuh"

namespace loom::bench {

nlohmann::json bench_sampling(const Context& c) {
  struct Mode {
    const char* name;
    float temperature;
    int top_k;
    float top_p;
  };
  const Mode modes[] = {{"greedy", 0.0f, 0, 1.0f},
                        {"temperature 0.9", 0.9f, 0, 1.0f},
                        {"top-k 50", 1.0f, 50, 1.0f},
                        {"top-p 0.9", 1.0f, 0, 0.9f},
                        {"top-p 0.9 T 0.9", 0.9f, 0, 0.9f},
                        {"top-k 1000 top-p 0.9", 1.0f, 1000, 0.9f}};
  const int vocab = 262145, ld = (vocab + 63) / 64 * 64, max_rows = 256, checked_rows = 16;
  nlohmann::json out = nlohmann::json::array();
  for (const DType lt : {DType::F32, DType::BF16})
    for (float sigma : {1.0f, 4.0f}) {
      std::vector<float> logits(size_t(max_rows) * ld, 0.0f);  // [256, ld]
      std::mt19937_64 g(uint64_t(sigma * 1000));
      std::normal_distribution<float> nd(0.0f, sigma);
      for (int r = 0; r < max_rows; r++)
        for (int i = 0; i < vocab; i++) logits[size_t(r) * ld + size_t(i)] = nd(g);
      Buffers d;
      const void* dl = d.upload(logits, lt);  // lt [256, ld]
      if (lt == DType::BF16)                  // the host sampler gets the values the device holds
        for (float& v : logits) v = bf16_to_f32(f32_to_bf16(v));
      void* ws = d.alloc(gpu::sample_workspace_bytes(max_rows));
      auto* tok = static_cast<int32_t*>(d.alloc(size_t(max_rows) * 4));
      for (const Mode& m : modes)
        for (int rows : {1, max_rows}) {
          std::vector<gpu::SampleParamsDev> p(static_cast<size_t>(rows));
          for (int r = 0; r < rows; r++) {
            p[size_t(r)].seed = 1234 + uint64_t(r);
            p[size_t(r)].draw_index = 77;
            p[size_t(r)].temperature = m.temperature;
            p[size_t(r)].top_k = m.top_k;
            p[size_t(r)].top_p = m.top_p;
            p[size_t(r)].sample_index = uint32_t(r % 4);
            p[size_t(r)].active = 1;
          }
          const auto* dp = d.upload_ints(p);
          auto call = [&] {
            LOOM_KERNEL(gpu::sample_tokens(lt, dl, rows, vocab, ld, dp, ws, tok, c.stream));
          };
          call();
          std::vector<int32_t> got(static_cast<size_t>(rows));
          LOOM_CUDA_CHECK(cudaStreamSynchronize(c.stream));
          LOOM_CUDA_CHECK(cudaMemcpy(got.data(), tok, got.size() * 4, cudaMemcpyDeviceToHost));
          int agree = 0;
          const int n_check = std::min(rows, checked_rows);
          for (int r = 0; r < n_check; r++) {
            SamplingParams sp;
            sp.temperature = m.temperature;
            sp.top_k = m.top_k;
            sp.top_p = m.top_p;
            sp.seed = p[size_t(r)].seed;
            agree += sample_token(logits.data() + size_t(r) * ld, vocab, sp, uint32_t(r % 4), 77) ==
                     got[size_t(r)];
          }
          const double us = time_us(c, call, 20, 2);
          std::printf(
              "sample %-21s %-4s sigma %.0f %3d rows: %9.1f us a step (%6.2f us a row), %d/%d "
              "rows equal to the host sampler%s\n",
              m.name, dtype_name(lt), double(sigma), rows, us, us / rows, agree, n_check,
              agree == n_check ? "" : "  INVALID");
          out.push_back({{"mode", m.name},
                         {"logits", dtype_name(lt)},
                         {"sigma", sigma},
                         {"rows", rows},
                         {"us", us},
                         {"checked_rows", n_check},
                         {"equal_rows", agree},
                         {"valid", agree == n_check}});
        }
    }
  return out;
}

}  // namespace loom::bench
