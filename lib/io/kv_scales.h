// The FP8 KV scales file (`--kv-scales F`, written by `loom calibrate`):
//   {"format": "loom-kv-scales", "version": 1, "dtype": "float8_e4m3fn",
//    "convention": "stored = x / s; dequantised = q * s",
//    "granularity": "layer" | "head", "layers": L, "kv_heads": H,
//    "k": [L numbers] | [L arrays of H numbers], "v": same, ...}
// "k" scales the K cache (after RoPE), "v" the V cache; one number per layer applies to every
// kv head of it. Anything else in the object (margin, calibration facts) is carried along.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/kv_format.h"

namespace loom {

// Reads and checks F against the model's shape: format, layer and head counts, every scale
// finite and > 0. Errors name the file, the key and the index.
KvScales read_kv_scales(const std::string& path, int layers, int kv_heads);

// The file's JSON for `scales` (granularity "head" unless every layer's heads agree) with
// `extra` fields appended (e.g. "margin", "calibration").
nlohmann::ordered_json kv_scales_json(const KvScales& scales, const nlohmann::ordered_json& extra);

}  // namespace loom
