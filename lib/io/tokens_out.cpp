// Safetensors writer for generated tokens (tokens_out.h). Layout: 8-byte little-endian header
// length N, N bytes of JSON header padded with spaces to a multiple of 8 (as the reference
// implementation pads, so the data section is aligned), then the int32 data.
#include "io/tokens_out.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"

namespace loom {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool keep(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("cannot write tokens to ", path, ": ", std::strerror(errno));
    p += w;
    n -= size_t(w);
  }
}

}  // namespace

std::string tokens_file_id(const std::string& id) {
  LOOM_CHECK(!id.empty() && id != "." && id != "..", "job id \"", id,
             "\" cannot name a tokens file: expected an id other than \"\", \".\" and \"..\"");
  std::string out;
  bool changed = false;
  for (size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    bool ok = keep(c) && !(i == 0 && c == '.');  // no hidden files
    out += ok ? c : '_';
    changed |= !ok;
  }
  if (out.size() > kMaxFileIdChars) {
    out.resize(kMaxFileIdChars);
    changed = true;
  }
  if (changed) {
    char hash[16];
    std::snprintf(hash, sizeof hash, "-%08x", unsigned(fnv1a(id) & 0xffffffffu));
    out += hash;
  }
  return out;
}

std::string tokens_file_name(const std::string& id, uint32_t sample) {
  return cat(tokens_file_id(id), ".sample-", sample, ".safetensors");
}

std::string write_tokens_safetensors(const std::string& dir, const JobResult& r,
                                     const std::string& model_name, uint64_t seed) {
  LOOM_CHECK(r.ok, "job ", r.id, " failed: it has no tokens to write");
  // Rows: one per frame, or the plain tokens as one row.
  int64_t rows = r.has_frames ? int64_t(r.frames.size()) : 1;
  int64_t cols = r.has_frames ? (r.frames.empty() ? 0 : int64_t(r.frames[0].size()))
                              : int64_t(r.tokens.size());
  std::vector<int32_t> data;  // [rows, cols]
  data.reserve(size_t(rows * cols));
  if (r.has_frames) {
    for (size_t f = 0; f < r.frames.size(); ++f) {
      LOOM_CHECK(int64_t(r.frames[f].size()) == cols, "job ", r.id, " sample ", r.sample,
                 ": frame ", f, " has ", r.frames[f].size(), " tokens: expected ", cols,
                 " like frame 0");
      data.insert(data.end(), r.frames[f].begin(), r.frames[f].end());
    }
  } else {
    data = r.tokens;
  }
  const uint64_t nbytes = uint64_t(data.size()) * sizeof(int32_t);

  nlohmann::ordered_json header;
  header["__metadata__"] = {{"id", r.id},
                            {"sample", std::to_string(r.sample)},
                            {"seed", std::to_string(seed)},
                            {"model", model_name}};
  header["tokens"] = {{"dtype", "I32"}, {"shape", {rows, cols}}, {"data_offsets", {0, nbytes}}};
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = dir + "/" + tokens_file_name(r.id, r.sample);
  std::string tmp = cat(dir, "/.", tokens_file_name(r.id, r.sample), ".tmp-", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    fail("cannot write tokens to ", path, ": ", std::strerror(errno),
         "; check the directory exists and is writable");
  }
  try {
    write_all(fd, &header_len, 8, path);
    write_all(fd, text.data(), text.size(), path);
    write_all(fd, data.data(), nbytes, path);
    // Durable before it gets its name: a crash never leaves an empty file that looks done.
    if (::fsync(fd) != 0) fail("cannot write tokens to ", path, ": ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail("cannot write tokens to ", path, ": ", std::strerror(e));
  }
  return path;
}

}  // namespace loom
