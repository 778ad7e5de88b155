#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace loom {

namespace {

// Bytes an element of a safetensors dtype that loom's DType lacks; 0 for no safetensors dtype.
size_t foreign_dtype_size(const std::string& d) {
  if (d == "BOOL" || d == "I8" || d == "F8_E5M2" || d == "F8_E4M3") return 1;
  if (d == "I16" || d == "U16") return 2;
  if (d == "U32") return 4;
  if (d == "F64" || d == "U64") return 8;
  return 0;
}

constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;  // same limit as the Rust crate

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

// "[a, b]" of a JSON value for messages, kept short.
std::string brief(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

bool as_u64(const nlohmann::json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = uint64_t(v.get<int64_t>());
    return true;
  }
  return false;
}

}  // namespace

struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  const uint64_t size = uint64_t(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, ": file is ", size, " bytes, too short for a safetensors header (needs 8 or more)");
  }
  auto mapping = std::make_shared<Mapping>();
  void* addr = mmap(nullptr, size_t(size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  if (addr == MAP_FAILED) fail(path, ": mmap failed: ", std::strerror(map_errno));
  mapping->addr = addr;
  mapping->size = size_t(size);
  f.mapping_ = mapping;
  const auto* base = static_cast<const uint8_t*>(addr);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | base[i];  // little endian
  if (header_len > kMaxHeaderBytes)
    fail(path, ": header length ", header_len, " exceeds the 100 MB limit (corrupt file?)");
  if (header_len > size - 8)
    fail(path, ": header length ", header_len, " runs past the end of the file (", size, " bytes)");
  const uint64_t data_size = size - 8 - header_len;
  f.data_ = base + 8 + header_len;

  // A name given twice would silently take its last entry (nlohmann keeps the last key): the
  // safetensors library refuses such a file, and so does loom.
  nlohmann::json header;
  std::set<std::string> keys;
  std::string twice;
  auto on_key = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    if (ev == nlohmann::json::parse_event_t::key && depth == 1 && twice.empty() &&
        !keys.insert(parsed.get<std::string>()).second)
      twice = parsed.get<std::string>();
    return true;
  };
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(base + 8),
                                   reinterpret_cast<const char*>(base + 8 + header_len), on_key);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) fail(path, ": header is not a JSON object");
  if (!twice.empty()) fail(path, ": tensor ", quoted(twice), " is listed twice in the header");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, ": \"__metadata__\" must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail(path, ": \"__metadata__\" must map strings to strings; key ", quoted(m.key()),
               " holds ", brief(m.value()));
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor " + quoted(name) + ": ";
    if (!v.is_object()) fail(where, "entry is not an object");
    Entry e;
    e.name = name;

    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) fail(where, "missing \"dtype\" string");
    if (!parse_safetensors_dtype(dt->get<std::string>(), &e.dtype)) {
      const size_t size = foreign_dtype_size(dt->get<std::string>());
      if (size == 0)
        fail(where, "unknown dtype ", quoted(dt->get<std::string>()),
             " (the safetensors format has F64, F32, F16, BF16, F8_E5M2, F8_E4M3, I64, I32, I16, "
             "I8, U64, U32, U16, U8, BOOL)");
      e.foreign = dt->get<std::string>();
      e.dtype = DType::U8;
      e.foreign_size = size;
    }

    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) fail(where, "missing \"shape\" list");
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : *sh) {
      uint64_t n = 0;
      if (!as_u64(d, &n) || n > uint64_t(INT64_MAX))
        fail(where, "shape ", brief(*sh), " must hold non-negative integers");
      e.shape.push_back(int64_t(n));
      overflow |= __builtin_mul_overflow(numel, n, &numel);
    }

    auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !as_u64((*off)[0], &e.begin) ||
        !as_u64((*off)[1], &e.end))
      fail(where, "\"data_offsets\" must be [begin, end] of non-negative integers, found ",
           off == v.end() ? std::string("nothing") : brief(*off));
    const std::string range = cat("data_offsets [", e.begin, ", ", e.end, "]");
    if (e.begin > e.end) fail(where, range, " has begin after end");
    if (e.end > data_size) fail(where, range, " run past the data section (", data_size, " bytes)");
    uint64_t need = 0;
    const uint64_t elem = e.foreign.empty() ? dtype_size(e.dtype) : e.foreign_size;
    overflow |= __builtin_mul_overflow(numel, elem, &need);
    if (overflow || need != e.nbytes())
      fail(where, range, " hold ", e.nbytes(), " bytes, shape ", shape_str(e.shape), " ",
           e.foreign.empty() ? std::string(dtype_name(e.dtype)) : e.foreign, " needs ",
           overflow ? std::string("more than 2^64") : std::to_string(need));
    f.entries_.push_back(std::move(e));
  }

  // Overlap: sort by begin; an empty tensor overlaps nothing.
  std::vector<const Entry*> by_begin;
  for (const Entry& e : f.entries_)
    if (e.nbytes() > 0) by_begin.push_back(&e);
  std::sort(by_begin.begin(), by_begin.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_begin.size(); i++) {
    const Entry& a = *by_begin[i - 1];
    const Entry& b = *by_begin[i];
    if (b.begin < a.end)
      fail(path, ": tensors ", quoted(a.name), " [", a.begin, ", ", a.end, "] and ", quoted(b.name),
           " [", b.begin, ", ", b.end, "] overlap");
  }

  // Every data byte belongs to a tensor, as the safetensors library requires (a gap or trailing
  // bytes: a file written by something else, or a header that lies).
  uint64_t covered = 0;
  for (const Entry* e : by_begin) {
    if (e->begin != covered)
      fail(path, ": bytes [", covered, ", ", e->begin, ") of the data section belong to no tensor ",
           "(before ", quoted(e->name), "); expected tensors back to back");
    covered = e->end;
  }
  if (covered != data_size)
    fail(path, ": the data section is ", data_size, " bytes but its tensors end at ", covered,
         "; expected no bytes after the last tensor");

  // nlohmann::json objects iterate in key order, so entries_ is already sorted by name.
  for (size_t i = 0; i < f.entries_.size(); i++) f.index_[f.entries_[i].name] = i;
  return f;
}

const SafetensorsFile::Entry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const Entry* e = find(name);
  if (!e) fail(path_, ": no tensor ", quoted(name));
  return tensor(*e);
}

Tensor SafetensorsFile::tensor(const Entry& e) const {
  Tensor t;
  t.dtype = e.dtype;
  t.shape = e.shape;
  t.data = data_ + e.begin;
  t.owner = mapping_;  // the view keeps the whole mapping alive
  return t;
}

uint64_t SafetensorsFile::file_size() const {
  return mapping_ ? mapping_->size : 0;
}

void SafetensorsFile::prefetch() const {
  if (mapping_) madvise(mapping_->addr, mapping_->size, MADV_WILLNEED);
}

}  // namespace loom
