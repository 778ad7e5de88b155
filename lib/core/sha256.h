// SHA-256 (FIPS 180-4), for the dataset's file checksums (`SHA256SUMS`, `loom verify`): the
// hash `sha256sum`, Python's hashlib and every object store speak, so a copied dataset can be
// checked with or without loom. None of loom's dependencies provides it; fnv.h's FNV-1a stays
// the hash of fingerprints and job lines, where no other tool needs to read it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace loom {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // 64 lowercase hex digits; the object is spent afterwards

 private:
  void block(const uint8_t* p);  // one 64-byte block into state_
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buf_{};
  size_t used_ = 0;     // bytes in buf_
  uint64_t total_ = 0;  // bytes hashed
};

inline std::string sha256_hex(std::string_view s) {
  Sha256 h;
  h.update(s);
  return h.hex();
}

// The SHA-256 of a whole file, read in 1 MiB pieces; throws loom::Error naming it. `each`, when
// given, sees every piece as it is read (its offset, bytes, length): a caller that checks the
// bytes too reads the file once.
std::string sha256_file(
    const std::string& path,
    const std::function<void(uint64_t offset, const char* bytes, size_t n)>& each = {});

}  // namespace loom
