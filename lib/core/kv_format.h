// The KV cache's element type and, for FP8, its scales (README "FP8 KV cache"; the scales file
// format is io/kv_scales.h). Fixed before the first step: graphs are captured with them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

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
  std::string source;       // the file it was read from (reports, dataset provenance)
  bool empty() const { return k.empty(); }
  void check_shape(int model_layers, int model_kv_heads) const {
    LOOM_CHECK(layers == model_layers && kv_heads == model_kv_heads, "KV scales for ", layers,
               " layers x ", kv_heads, " kv heads; the model has ", model_layers, " x ",
               model_kv_heads);
  }
  float k_at(int layer, int head) const { return k[size_t(layer) * kv_heads + head]; }
  float v_at(int layer, int head) const { return v[size_t(layer) * kv_heads + head]; }
  // [layers, 2, kv_heads]: per layer the K scales then the V scales, the layout the KV kernels
  // and references take (a layer's slice: kv_scale of RopeKvArgs / AttentionArgs).
  std::vector<float> layer_rows() const {
    std::vector<float> r;
    for (int l = 0; l < layers; l++) {
      for (int h = 0; h < kv_heads; h++) r.push_back(k_at(l, h));
      for (int h = 0; h < kv_heads; h++) r.push_back(v_at(l, h));
    }
    return r;
  }
  static KvScales ones(int layers, int kv_heads) {
    KvScales s;
    s.layers = layers, s.kv_heads = kv_heads;
    s.k.assign(size_t(layers) * kv_heads, 1.0f);
    s.v = s.k;
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

  // From maxima in KvScales::layer_rows' layout [layers, 2, kv_heads].
  static KvStats from_layer_rows(const std::vector<float>& rows, int layers, int kv_heads,
                                 uint64_t elements, uint64_t saturated) {
    KvStats st;
    for (int l = 0; l < layers; l++)
      for (int h = 0; h < kv_heads; h++) {
        st.k_absmax.push_back(rows[(size_t(l) * 2) * kv_heads + h]);
        st.v_absmax.push_back(rows[(size_t(l) * 2 + 1) * kv_heads + h]);
      }
    st.elements = elements;
    st.saturated = saturated;
    return st;
  }
};

}  // namespace loom
