// Test helpers: write safetensors files and tiny checkpoint directories in a temp folder, so
// the reader and loader tests need no fixture files (and malformed files are made on the spot).
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace loom::fixture {

struct FixtureTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // row-major, little endian
  std::string st_name;         // the header's dtype when not dtype's ("BOOL", "F64")
};

inline const char* st_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::U8:
      return "U8";
  }
  return "?";
}

// A float tensor holding `values` encoded as `dtype` (bf16/f16/f32).
inline FixtureTensor make_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                 const std::vector<float>& values) {
  FixtureTensor t{name, dtype, std::move(shape), {}};
  const size_t width = dtype == DType::F32 ? 4 : 2;
  t.bytes.resize(values.size() * width);
  for (size_t i = 0; i < values.size(); i++) {
    if (dtype == DType::F32) {
      std::memcpy(t.bytes.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);  // little-endian host
    }
  }
  return t;
}

// Values chosen so every tensor differs and bf16 holds them exactly: small integers / 4.
inline std::vector<float> pattern(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) v[size_t(i)] = float((seed * 37 + i * 7) % 251 - 125) / 4.0f;
  return v;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  LOOM_CHECK(out.good(), "test fixture: cannot write ", path);
}

inline std::string u64_le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; i++) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s;
}

// header length + header + data, exactly as given (for malformed files).
inline void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  write_file(path, u64_le(header.size()) + header + data);
}

// A valid safetensors file with tensors laid out back to back in the given order.
inline void write_safetensors(const std::string& path, const std::vector<FixtureTensor>& tensors,
                              const nlohmann::json& metadata = nullptr) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& t : tensors) {
    const uint64_t begin = data.size();
    data.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
    header[t.name] = {{"dtype", t.st_name.empty() ? st_dtype(t.dtype) : t.st_name.c_str()},
                      {"shape", t.shape},
                      {"data_offsets", {begin, uint64_t(data.size())}}};
  }
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';  // writers pad the header to 8 bytes with spaces
  write_raw(path, h, data);
}

inline std::string make_temp_dir() {
  char tmpl[] = "/tmp/loom_test_XXXXXX";
  const char* d = mkdtemp(tmpl);
  LOOM_CHECK(d, "test fixture: mkdtemp failed");
  return d;
}

inline std::string make_subdir(const std::string& parent, const std::string& name) {
  const std::string p = parent + "/" + name;
  LOOM_CHECK(::mkdir(p.c_str(), 0755) == 0, "test fixture: mkdir ", p);
  return p;
}

// Removes a directory made by make_temp_dir (flat or one level of subfolders).
inline void remove_tree(const std::string& dir) {
  const std::string cmd = "rm -rf '" + dir + "'";
  if (dir.rfind("/tmp/loom_test_", 0) == 0) (void)std::system(cmd.c_str());
}

// The loom::Error message `f` throws, or "" if it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A folder made for one test and removed with it.
struct TempDir {
  std::string path = make_temp_dir();
  ~TempDir() { remove_tree(path); }
};

}  // namespace loom::fixture

// Checks that `expr` throws a loom::Error whose message contains `expected`.
#define CHECK_ERROR(expr, expected)                                            \
  do {                                                                         \
    const std::string msg_ = ::loom::fixture::error_of([&] { (void)(expr); }); \
    INFO("message: ", msg_);                                                   \
    CHECK(msg_.find(expected) != std::string::npos);                           \
  } while (0)
