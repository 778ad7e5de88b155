// How one sequence draws its tokens. A value type read by three layers — the job schema
// (lib/io: a job's "sampling" and the run's defaults), the engine, and the backends' samplers —
// so it lives on the lowest floor, and lib/io needs nothing from lib/backend.
#pragma once

#include <cstdint>

namespace loom {

// The least temperature above 0 (greedy): logit / T overflows fp32 below it (1e-40 drew NaN
// garbage); vLLM's sampling epsilon.
constexpr float kMinTemperature = 1e-5f;

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy (argmax, lowest id on ties)
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  uint64_t seed = 0;

  // Whether each filter keeps fewer than all `vocab` ids (otherwise it is off).
  bool top_k_on(int vocab) const { return top_k > 0 && top_k < vocab; }
  bool top_p_on() const { return top_p < 1.0f; }
};

}  // namespace loom
