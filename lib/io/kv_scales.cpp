#include "io/kv_scales.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/fp8.h"

namespace loom {

using ojson = nlohmann::ordered_json;

namespace {

// A scale the fp32 quantiser can use: 1/s (the factor stored values are multiplied by) and
// 448 · s (the largest dequantised value) both finite in fp32.
bool usable_scale(double s) {
  const float f = float(s);
  return std::isfinite(s) && s > 0 && f > 0 && std::isfinite(1.0f / f) &&
         std::isfinite(kFp8E4m3Max * f);
}

// "[2.94e-39, 7.6e+35]": the range usable_scale accepts, for messages.
std::string scale_range() {
  constexpr float kMax = std::numeric_limits<float>::max();
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%.3g, %.3g]", 1.0 / double(kMax), double(kMax) / kFp8E4m3Max);
  return buf;
}

// One of "k" / "v": L numbers, or L arrays of H numbers, into out [L, H].
std::vector<float> read_side(const ojson& j, const char* key, int layers, int kv_heads,
                             const std::string& path) {
  auto where = [&](int l, int h) {
    return h < 0 ? cat(path, ": \"", key, "\"[", l, "]")
                 : cat(path, ": \"", key, "\"[", l, "][", h, "]");
  };
  LOOM_CHECK(j.contains(key) && j[key].is_array(), path, ": expected \"", key, "\": an array of ",
             layers, " scales (one per layer) or of ", layers, " arrays of ", kv_heads,
             " (one per kv head)");
  const ojson& a = j[key];
  LOOM_CHECK(int(a.size()) == layers, path, ": \"", key, "\" has ", a.size(),
             " entries; the model has ", layers, " layers");
  std::vector<float> out(size_t(layers) * kv_heads);
  auto take = [&](const ojson& x, int l, int h) {
    LOOM_CHECK(x.is_number(), where(l, h), ": expected a number, found ", x.dump());
    const double s = x.get<double>();
    LOOM_CHECK(usable_scale(s), where(l, h), ": scale ", x.dump(), ": expected a number in ",
               scale_range(), " (1/s and 448 s must be finite in fp32)");
    return float(s);
  };
  for (int l = 0; l < layers; l++) {
    const ojson& e = a[size_t(l)];
    if (e.is_array()) {
      LOOM_CHECK(int(e.size()) == kv_heads, where(l, -1), " has ", e.size(),
                 " scales; the model has ", kv_heads, " kv heads");
      for (int h = 0; h < kv_heads; h++) out[size_t(l) * kv_heads + h] = take(e[size_t(h)], l, h);
    } else {
      const float s = take(e, l, -1);
      for (int h = 0; h < kv_heads; h++) out[size_t(l) * kv_heads + h] = s;
    }
  }
  return out;
}

}  // namespace

KvScales read_kv_scales(const std::string& path, int layers, int kv_heads) {
  std::ifstream in(path);
  LOOM_CHECK(in.good(), "--kv-scales ", path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  ojson j;
  try {
    j = ojson::parse(ss.str());
  } catch (const ojson::exception& e) {  // a syntax error, or a number past a double
    // "[json.exception.parse_error.101] parse error at line 1, ..." without the tag.
    const std::string what = e.what();
    const size_t tag = what.find("] ");
    fail("--kv-scales ", path,
         ": not valid JSON: ", tag == std::string::npos ? what : what.substr(tag + 2));
  }
  LOOM_CHECK(j.is_object(), "--kv-scales ", path, ": not a JSON object");
  LOOM_CHECK(j.value("format", "") == "loom-kv-scales", path,
             ": expected \"format\": \"loom-kv-scales\" (a file from loom calibrate)");
  LOOM_CHECK(j.value("version", 0) == 1, path, ": version ", j.value("version", 0),
             " (this loom reads version 1)");
  LOOM_CHECK(j.value("layers", -1) == layers && j.value("kv_heads", -1) == kv_heads, path,
             ": scales for ", j.value("layers", -1), " layers x ", j.value("kv_heads", -1),
             " kv heads; the model has ", layers, " x ", kv_heads);
  KvScales s;
  s.layers = layers, s.kv_heads = kv_heads;
  s.k = read_side(j, "k", layers, kv_heads, path);
  s.v = read_side(j, "v", layers, kv_heads, path);
  s.source = path;
  return s;
}

ojson kv_scales_json(const KvScales& s, const ojson& extra) {
  bool per_layer = true;
  for (int l = 0; l < s.layers; l++)
    for (int h = 1; h < s.kv_heads; h++)
      per_layer = per_layer && s.k_at(l, h) == s.k_at(l, 0) && s.v_at(l, h) == s.v_at(l, 0);
  auto side = [&](bool k) {
    ojson a = ojson::array();
    for (int l = 0; l < s.layers; l++) {
      if (per_layer) {
        a.push_back(k ? s.k_at(l, 0) : s.v_at(l, 0));
        continue;
      }
      ojson row = ojson::array();
      for (int h = 0; h < s.kv_heads; h++) row.push_back(k ? s.k_at(l, h) : s.v_at(l, h));
      a.push_back(row);
    }
    return a;
  };
  ojson j;
  j["format"] = "loom-kv-scales";
  j["version"] = 1;
  j["dtype"] = "float8_e4m3fn";
  j["convention"] =
      "stored = e4m3(x * (1/s)), round to nearest even, saturating at 448; "
      "dequantised = q * s; k: K after RoPE";
  j["granularity"] = per_layer ? "layer" : "head";
  j["layers"] = s.layers;
  j["kv_heads"] = s.kv_heads;
  j["k"] = side(true);
  j["v"] = side(false);
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

}  // namespace loom
