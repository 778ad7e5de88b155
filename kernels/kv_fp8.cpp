// fp32 reference of kv_stats (kv_fp8.h).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fp8.h"
#include "kernels/kv_fp8.h"

namespace loom::cpu {

void kv_stats(const KvStatsArgs& a) {
  LOOM_CHECK(a.t == DType::F32, "cpu::kv_stats: dtype ", dtype_name(a.t),
             " (the reference is fp32)");
  LOOM_CHECK(a.k_cache && a.v_cache && a.cache_slot && a.absmax && a.counts,
             "cpu::kv_stats: null pointer");
  const size_t row = size_t(a.kv_heads) * a.head_dim;
  for (int i = 0; i < a.n_slots; i++) {
    const int cs = a.cache_slot[i];
    if (cs < 0) continue;
    for (int side = 0; side < 2; side++) {
      const float* c = static_cast<const float*>(side ? a.v_cache : a.k_cache) + size_t(cs) * row;
      for (size_t e = 0; e < row; e++) {
        const int h = int(e / size_t(a.head_dim));
        const float x = std::fabs(c[e]);
        float& m = a.absmax[side * a.kv_heads + h];
        m = std::max(m, x);
        if (a.scales) a.counts[1] += x * (1.0f / a.scales[side * a.kv_heads + h]) > kFp8E4m3Max;
      }
      a.counts[0] += row;
    }
  }
}

}  // namespace loom::cpu
