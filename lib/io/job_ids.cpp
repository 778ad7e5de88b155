// JobIdIndex (job_ids.h): linear probing over a table of 32-bit entry numbers. The entries
// themselves live in a deque, so the table is the only thing rehashed when the index grows
// and the peak while growing is one table more, not a second copy of every entry.
#include "io/job_ids.h"

#include <cstring>
#include <functional>

#include "core/error.h"

namespace loom {

static_assert(sizeof(size_t) == 8, "job_id_hash needs 64-bit std::hash");

uint64_t job_id_hash(std::string_view id) {
  return std::hash<std::string_view>{}(id);
}

bool id_text(simdjson::dom::element value, std::string& text, bool& is_number) {
  switch (value.type()) {
    case simdjson::dom::element_type::STRING:
      text = std::string(std::string_view(value));
      is_number = false;
      return true;
    case simdjson::dom::element_type::INT64:
      text = std::to_string(int64_t(value));
      is_number = true;
      return true;
    case simdjson::dom::element_type::UINT64:
      text = std::to_string(uint64_t(value));
      is_number = true;
      return true;
    default:
      return false;
  }
}

JobIdIndex::JobIdIndex(IdAt id_at, IdHash hash) : id_at_(std::move(id_at)), hash_(hash) {
  slots_.assign(1024, 0);
}

std::string JobIdIndex::id_of(const Entry& e) {
  ++rereads_;
  if (!id_at_) {
    uint32_t n = 0;
    std::memcpy(&n, texts_.data() + e.where, sizeof n);
    return texts_.substr(e.where + sizeof n, n);
  }
  std::string id = id_at_(e.line, e.where);
  // The file was read once already; a different id now means it changed under the run.
  LOOM_CHECK(hash_(id) == e.hash, "the jobs file changed while it was read: line ", e.line,
             " no longer has the id it had; do not edit a jobs file during a run");
  return id;
}

void JobIdIndex::grow() {
  std::vector<uint32_t> bigger(slots_.size() * 2, 0);
  const size_t mask = bigger.size() - 1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    size_t s = entries_[i].hash & mask;
    while (bigger[s] != 0) s = (s + 1) & mask;
    bigger[s] = uint32_t(i + 1);
  }
  slots_.swap(bigger);
}

int64_t JobIdIndex::add(std::string_view id, int64_t line, uint64_t offset) {
  const uint64_t h = hash_(id);
  const size_t mask = slots_.size() - 1;
  size_t s = h & mask;
  for (; slots_[s] != 0; s = (s + 1) & mask) {
    const Entry& e = entries_[slots_[s] - 1];
    if (e.hash == h && id_of(e) == id) return e.line;
  }
  LOOM_CHECK(entries_.size() < UINT32_MAX - 1, "more than 4 billion job ids in one run");
  Entry e{h, line, offset};
  if (!id_at_) {
    LOOM_CHECK(id.size() <= UINT32_MAX, "job id of line ", line, " is too long");
    e.where = texts_.size();
    const uint32_t n = uint32_t(id.size());
    texts_.append(reinterpret_cast<const char*>(&n), sizeof n);
    texts_.append(id.data(), id.size());
  }
  entries_.push_back(e);
  slots_[s] = uint32_t(entries_.size());
  if (entries_.size() * 2 > slots_.size()) grow();
  return 0;
}

std::string id_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace loom
