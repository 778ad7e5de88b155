// fp32 reference of rope_kv_write (rope.h).
#include <cmath>

#include "core/error.h"
#include "core/fp8.h"
#include "kernels/rope.h"

namespace loom {

std::vector<float> rope_inv_freq(int head_dim, float theta, bool rotary) {
  std::vector<float> inv(size_t(head_dim / 2), 0.0f);
  for (int j = 0; rotary && j < head_dim / 2; j++)
    inv[size_t(j)] = 1.0f / std::pow(theta, float(2 * j) / float(head_dim));
  return inv;
}

namespace cpu {

void rope_kv_write(const RopeKvArgs& a) {
  LOOM_CHECK(a.t == DType::F32, "cpu::rope_kv_write: dtype ", dtype_name(a.t),
             " (the reference is fp32)");
  LOOM_CHECK(a.qkv && a.positions && a.cache_slot && a.inv_freq && a.k_cache && a.v_cache,
             "cpu::rope_kv_write: null pointer");
  const int D = a.head_dim, half = D / 2, row = (a.heads + 2 * a.kv_heads) * D;
  const size_t kv_row = size_t(a.kv_heads) * D;
  std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));  // [head_dim / 2]
  std::vector<float> k(static_cast<size_t>(D));                                   // [head_dim]
  for (int i = 0; i < a.n_slots; i++) {
    float* q = static_cast<float*>(a.qkv) + size_t(i) * row;
    for (int j = 0; j < half; j++) {
      const float angle = float(a.positions[i]) * a.inv_freq[j];
      c[size_t(j)] = std::cos(angle), s[size_t(j)] = std::sin(angle);
    }
    auto rotate = [&](const float* x, float* y) {
      for (int j = 0; j < half; j++) {
        const float x0 = x[j], x1 = x[j + half];
        y[j] = x0 * c[size_t(j)] - x1 * s[size_t(j)];
        y[j + half] = x1 * c[size_t(j)] + x0 * s[size_t(j)];
      }
    };
    for (int h = 0; h < a.heads; h++) rotate(q + size_t(h) * D, q + size_t(h) * D);
    const int cs = a.cache_slot[i];
    if (cs < 0) continue;
    float* kc = static_cast<float*>(a.k_cache) + size_t(cs) * kv_row;
    float* vc = static_cast<float*>(a.v_cache) + size_t(cs) * kv_row;
    for (int h = 0; h < a.kv_heads; h++) {
      rotate(q + size_t(a.heads + h) * D, k.data());
      const float* v = q + size_t(a.heads + a.kv_heads + h) * D;
      const float ks = a.kv_scale ? a.kv_scale[h] : 1.0f;
      const float vs = a.kv_scale ? a.kv_scale[a.kv_heads + h] : 1.0f;
      for (int d = 0; d < D; d++) {
        kc[size_t(h) * D + d] = a.kv_fp8 ? kv_fp8_round_trip(k[size_t(d)], ks) : k[size_t(d)];
        vc[size_t(h) * D + d] = a.kv_fp8 ? kv_fp8_round_trip(v[d], vs) : v[d];
      }
    }
  }
}

}  // namespace cpu
}  // namespace loom
