// The FP8 KV scales file (`--kv-scales F`, written by `loom calibrate`):
//   {"format": "loom-kv-scales", "version": 1, "dtype": "float8_e4m3fn",
//    "convention": "stored = e4m3(x * (1/s)), ...", "granularity": "layer" | "head",
//    "layers": L, "kv_heads": H, "k": [L numbers] | [L arrays of H numbers], "v": same,
//    "margin": m, "calibration": {...}, "absmax": {...}}
// "k" scales the K cache (after RoPE), "v" the V cache; granularity "layer" gives one number
// per layer (for every kv head of it), "head" an array per layer. Required: format, version,
// dtype, granularity, layers, kv_heads, k and v; convention (if given, the one loom writes),
// margin, calibration and absmax are calibrate's record, carried along. Any other key, a key
// given twice, or a value of another type is refused: a file loom would misread says so.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "core/kv_format.h"

namespace loom {

// The scales every file may hold: 1/s and 448 s are finite in fp32 for every s in between
// (1/FLT_MAX ≈ 2.9387e-39, FLT_MAX / 448 ≈ 7.5956e+35), and messages print these exact values.
constexpr double kMinKvScale = 2.94e-39;
constexpr double kMaxKvScale = 7.59e35;
// The scale calibrate writes for a head whose values reached `absmax` (margin ≥ 1): absmax ·
// margin / 448; 1.0 for a head that only wrote zeros (any scale represents them); at least
// kMinKvScale, so that the file is one run accepts (a head whose values all stay under ~1e-36
// is represented as well by it: they sit far below 448 s either way).
float kv_scale_for(float absmax, double margin);
// A scales file larger than this is refused unread: calibrate's for 128 layers x 128 kv heads
// is ~2 MiB; `--kv-scales /dev/zero` must not grow memory without bound.
constexpr size_t kMaxKvScalesBytes = size_t(16) << 20;

// Reads F once (a FIFO or `<(...)` works) and checks it against the model's shape: the keys
// above, layer and head counts, every scale in [kMinKvScale, kMaxKvScale]. Errors name the
// file, the key and the index, and what was expected.
KvScales read_kv_scales(const std::string& path, int layers, int kv_heads);

// The file's JSON for `scales` (granularity "head" unless every layer's heads agree) with
// `extra` fields appended (e.g. "margin", "calibration").
nlohmann::ordered_json kv_scales_json(const KvScales& scales, const nlohmann::ordered_json& extra);

}  // namespace loom
