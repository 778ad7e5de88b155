#include "io/kv_scales.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/fp8.h"

namespace loom {

using ojson = nlohmann::ordered_json;

namespace {

constexpr const char* kDtype = "float8_e4m3fn";
constexpr const char* kConvention =
    "stored = e4m3(x * (1/s)), round to nearest even, saturating at 448; "
    "dequantised = q * s; k: K after RoPE";

// The keys a scales file may hold, in the order calibrate writes them.
struct Key {
  const char* name;
  bool required;
};
constexpr Key kKeys[] = {
    {"format", true},      {"version", true}, {"dtype", true},        {"convention", false},
    {"granularity", true}, {"layers", true},  {"kv_heads", true},     {"k", true},
    {"v", true},           {"margin", false}, {"calibration", false}, {"absmax", false}};

// Every message starts with the option and the file.
std::string at(const std::string& path) {
  return cat("--kv-scales ", path, ": ");
}

std::string json_str(const std::string& s) {
  return ojson(s).dump();
}

// What a JSON value is, for the "found ..." half of a message.
std::string describe(const ojson& x) {
  if (x.is_array()) return x.empty() ? "an empty array" : cat("an array of ", x.size());
  if (x.is_object()) return "an object";
  const std::string text = x.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// The file's bytes, read once: a FIFO or /dev/fd/N (`<(cat s.json)`) has no second reading.
std::string read_text(const std::string& path) {
  const std::string expected = "expected a scales JSON file from loom calibrate";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  LOOM_CHECK(fd >= 0, at(path), "cannot open it: ", std::strerror(errno), "; ", expected);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail(at(path), "it is a folder; ", expected);
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(at(path), "cannot read it: ", std::strerror(err), "; ", expected);
    }
    if (n == 0) break;
    text.append(buf, size_t(n));
    if (text.size() > kMaxKvScalesBytes) {
      ::close(fd);
      fail(at(path), "more than ", kMaxKvScalesBytes >> 20, " MiB; ", expected,
           " (a few KiB for most models)");
    }
  }
  ::close(fd);
  return text;
}

// Parses `text`, refusing a key given twice in one object (the JSON library would keep one of
// them without a word).
ojson parse_json(const std::string& text, const std::string& path) {
  struct Open {
    std::set<std::string> keys;
    std::string last;  // the key whose value is being parsed
  };
  std::vector<Open> objects;  // outermost first
  std::string twice;
  auto callback = [&](int, ojson::parse_event_t event, ojson& parsed) {
    if (event == ojson::parse_event_t::object_start) objects.emplace_back();
    if (event == ojson::parse_event_t::object_end && !objects.empty()) objects.pop_back();
    if (event == ojson::parse_event_t::key && !objects.empty()) {
      const std::string key = parsed.get<std::string>();
      if (twice.empty() && !objects.back().keys.insert(key).second) {
        twice = "key " + json_str(key);
        for (size_t i = objects.size() - 1; i-- > 0;) twice += " of " + json_str(objects[i].last);
      }
      objects.back().last = key;
    }
    return true;
  };
  ojson j;
  try {
    j = ojson::parse(text, callback);
  } catch (const ojson::exception& e) {  // a syntax error, or a number past a double
    // "[json.exception.parse_error.101] parse error at line 1, ..." without the tag.
    const std::string what = e.what();
    const size_t tag = what.find("] ");
    fail(at(path), "not valid JSON: ", tag == std::string::npos ? what : what.substr(tag + 2));
  }
  LOOM_CHECK(twice.empty(), at(path), twice, ": expected each key once, found it a second time");
  return j;
}

// The value of `key`, which must be there (check_keys has said so) and of the type `is` tests.
const ojson& typed(const ojson& j, const char* key, bool (ojson::*is)() const noexcept,
                   const std::string& expected, const std::string& path) {
  const ojson& x = j.at(key);
  LOOM_CHECK((x.*is)(), at(path), json_str(key), ": expected ", expected, ", found ", describe(x));
  return x;
}

// "format" and "version" first (another file, or a later format, says so before its keys do),
// then every key known and every required one there.
void check_keys(const ojson& j, const std::string& path) {
  LOOM_CHECK(j.contains("format") && j["format"] == "loom-kv-scales", at(path),
             "expected \"format\": \"loom-kv-scales\" (a file from loom calibrate), found ",
             j.contains("format") ? describe(j["format"]) : "no \"format\"");
  LOOM_CHECK(j.contains("version"), at(path),
             "missing key \"version\": expected \"version\": 1 (this loom reads version 1)");
  const ojson& version = typed(j, "version", &ojson::is_number_integer,
                               "the integer 1 (this loom reads version 1)", path);
  LOOM_CHECK(version == 1, at(path), "\"version\": expected 1 (this loom reads version 1), found ",
             describe(version));
  std::string names;
  for (const Key& k : kKeys) names += cat(names.empty() ? "" : ", ", json_str(k.name));
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const Key& k : kKeys) known = known || it.key() == k.name;
    LOOM_CHECK(known, at(path), "unknown key ", json_str(it.key()), ": expected one of ", names);
  }
  for (const Key& k : kKeys)
    LOOM_CHECK(!k.required || j.contains(k.name), at(path), "missing key ", json_str(k.name),
               ": a scales file has format, version, dtype, granularity, layers, kv_heads, k "
               "and v (loom calibrate writes them)");
}

// A scale the fp32 quantiser can use: kv_scales.h's range, in which 1/s (the factor stored
// values are multiplied by) and 448 · s (the largest dequantised value) are finite in fp32.
bool usable_scale(double s) {
  return s >= kMinKvScale && s <= kMaxKvScale;
}

// One of "k" / "v" into [L, H]: L numbers (granularity "layer") or L arrays of H numbers
// ("head").
std::vector<float> read_side(const ojson& j, const char* key, bool per_head, int layers,
                             int kv_heads, const std::string& path) {
  auto where = [&](int l, int h) {
    return h < 0 ? cat(at(path), json_str(key), "[", l, "]")
                 : cat(at(path), json_str(key), "[", l, "][", h, "]");
  };
  const std::string granularity = per_head ? "\"head\"" : "\"layer\"";
  const ojson& a = typed(
      j, key, &ojson::is_array,
      per_head ? cat("an array of ", layers, " arrays of ", kv_heads,
                     " scales (granularity \"head\": one per layer and kv head)")
               : cat("an array of ", layers, " scales (granularity \"layer\": one per layer)"),
      path);
  LOOM_CHECK(int(a.size()) == layers, at(path), json_str(key), " has ", a.size(),
             " entries; the model has ", layers, " layers");
  auto take = [&](const ojson& x, int l, int h) {
    LOOM_CHECK(x.is_number(), where(l, h), ": expected a number, found ", describe(x));
    const double s = x.get<double>();
    LOOM_CHECK(usable_scale(s), where(l, h), ": scale ", x.dump(), ": expected a number in [",
               kMinKvScale, ", ", kMaxKvScale, "] (1/s and 448 s must be finite in fp32)");
    return float(s);
  };
  std::vector<float> out(size_t(layers) * kv_heads);
  for (int l = 0; l < layers; l++) {
    const ojson& e = a[size_t(l)];
    float* row = out.data() + size_t(l) * kv_heads;
    if (!per_head) {
      LOOM_CHECK(!e.is_array(), where(l, -1), ": expected a number (granularity ", granularity,
                 ": one scale per layer), found ", describe(e));
      const float s = take(e, l, -1);
      for (int h = 0; h < kv_heads; h++) row[h] = s;
      continue;
    }
    LOOM_CHECK(e.is_array(), where(l, -1), ": expected an array of ", kv_heads,
               " scales (granularity ", granularity, ": one per kv head), found ", describe(e));
    LOOM_CHECK(int(e.size()) == kv_heads, where(l, -1), " has ", e.size(),
               " scales; the model has ", kv_heads, " kv heads");
    for (int h = 0; h < kv_heads; h++) row[h] = take(e[size_t(h)], l, h);
  }
  return out;
}

}  // namespace

KvScales read_kv_scales(const std::string& path, int layers, int kv_heads) {
  const ojson j = parse_json(read_text(path), path);
  LOOM_CHECK(j.is_object(), at(path), "expected a JSON object (a file from loom calibrate), found ",
             describe(j));
  check_keys(j, path);
  const std::string dtype = typed(j, "dtype", &ojson::is_string, json_str(kDtype), path);
  LOOM_CHECK(dtype == kDtype, at(path), "\"dtype\": expected ", json_str(kDtype),
             " (loom's FP8 KV cache is e4m3), found ", json_str(dtype));
  if (j.contains("convention")) {
    const std::string c = typed(j, "convention", &ojson::is_string, json_str(kConvention), path);
    LOOM_CHECK(c == kConvention, at(path), "\"convention\": expected ", json_str(kConvention),
               " (the one loom quantises with; or leave it out), found ", json_str(c));
  }
  const std::string granularity =
      typed(j, "granularity", &ojson::is_string, "\"layer\" or \"head\"", path);
  LOOM_CHECK(granularity == "layer" || granularity == "head", at(path),
             "\"granularity\": expected \"layer\" or \"head\", found ", json_str(granularity));
  const ojson& file_layers = typed(j, "layers", &ojson::is_number_integer,
                                   cat("an integer (the model's ", layers, ")"), path);
  const ojson& file_heads = typed(j, "kv_heads", &ojson::is_number_integer,
                                  cat("an integer (the model's ", kv_heads, ")"), path);
  LOOM_CHECK(file_layers == layers && file_heads == kv_heads, at(path), "scales for ",
             file_layers.dump(), " layers x ", file_heads.dump(), " kv heads; the model has ",
             layers, " x ", kv_heads);
  if (j.contains("margin")) typed(j, "margin", &ojson::is_number, "a number", path);
  for (const char* record : {"calibration", "absmax"})
    if (j.contains(record)) typed(j, record, &ojson::is_object, "an object", path);
  KvScales s;
  s.layers = layers, s.kv_heads = kv_heads;
  s.k = read_side(j, "k", granularity == "head", layers, kv_heads, path);
  s.v = read_side(j, "v", granularity == "head", layers, kv_heads, path);
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
  j["dtype"] = kDtype;
  j["convention"] = kConvention;
  j["granularity"] = per_layer ? "layer" : "head";
  j["layers"] = s.layers;
  j["kv_heads"] = s.kv_heads;
  j["k"] = side(true);
  j["v"] = side(false);
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

float kv_scale_for(float absmax, double margin) {
  if (!(absmax > 0)) return 1.0f;
  const float s = float(double(absmax) * margin / kFp8E4m3Max);
  if (double(s) >= kMinKvScale) return s;
  return std::nextafter(float(kMinKvScale), 1.0f);  // float(kMinKvScale) may round below it
}

}  // namespace loom
