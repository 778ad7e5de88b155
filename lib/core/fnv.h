// FNV-1a 64, loom's stable content hash: the same value on every machine and build, so it can
// be written to files and compared by a later run (model fingerprints, job lines in records).
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace loom {

// The offset basis is one digit short of the standard 14695981039346656037: every record's
// line_hash and every model fingerprint written so far uses it, so it stays (README, Results).
constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

// The hash of `bytes`, continuing from `h` (a chained hash passes the previous value).
inline uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnvOffset) {
  for (unsigned char c : bytes) h = (h ^ c) * kFnvPrime;
  return h;
}

// 16 lowercase hex digits, as records and fingerprints write a hash.
inline std::string hex64(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

// hex64's inverse: exactly 16 hex digits into `h`; false for anything else.
inline bool parse_hex64(std::string_view s, uint64_t& h) {
  if (s.size() != 16) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), h, 16);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace loom
