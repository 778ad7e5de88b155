// The KV cache's element type and, for FP8, its scales (README "FP8 KV cache"; the scales file
// format is io/kv_scales.h). Fixed before the first step: graphs are captured with them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

// Auto: the compute dtype (f32 on the cpu backend and cuda --dtype f32, bf16 on cuda bf16).
// BF16: values rounded to bf16. FP8: e4m3 with a scale per (layer, kv head) for K and for V.
enum class KvDType { Auto, BF16, FP8 };

inline const char* kv_dtype_name(KvDType t) {
  return t == KvDType::FP8 ? "fp8" : t == KvDType::BF16 ? "bf16" : "auto";
}

// Per (layer, kv head) scales, stored q = e4m3(x / s), dequantised q · s (core/fp8.h).
struct KvScales {
  int layers = 0, kv_heads = 0;
  std::vector<float> k, v;  // [layers, kv_heads]
  std::string source;       // "default 1.0", "calibrated: FILE", … (reports, manifest)
  bool empty() const { return k.empty(); }
  float k_at(int layer, int head) const { return k[size_t(layer) * kv_heads + head]; }
  float v_at(int layer, int head) const { return v[size_t(layer) * kv_heads + head]; }
  static KvScales ones(int layers, int kv_heads) {
    KvScales s;
    s.layers = layers, s.kv_heads = kv_heads;
    s.k.assign(size_t(layers) * kv_heads, 1.0f);
    s.v = s.k;
    s.source = "default 1.0 (no --kv-scales)";
    return s;
  }
};

// What a backend collects for `loom calibrate` while it runs: the absolute maxima of the K
// (after RoPE) and V values it writes to the cache, per (layer, kv head), and, with scales
// given, how many of those elements an FP8 cache with them would saturate (|x| / s > 448).
struct KvStats {
  std::vector<float> k_absmax, v_absmax;  // [layers, kv_heads]
  uint64_t elements = 0;                  // K and V elements written
  uint64_t saturated = 0;                 // of them, beyond 448 · s (only with scales)
};

}  // namespace loom
