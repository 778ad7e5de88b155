// Job ids (issue 11 §3, §5). An id is compared by its text: the JSON integer 8 and the string
// "8" are the same id, and a line without an id gets "line-N", the same id as an explicit
// "line-N". A run refuses a job line whose id an earlier line of the run (its shard) already
// has; JobIdIndex is how it remembers the ids it has seen.
//
// A jobs file can have millions of lines, so the index keeps a 64-bit hash of each id rather
// than the id: an entry of 24 bytes (hash, line, byte offset of the line) plus a 4-byte slot of
// an open-addressed table kept at most half full. Equal hashes are never taken for equal ids:
// the earlier line's real id is fetched and compared — re-read from the jobs file at its byte
// offset when the input is a regular file, or taken from the id text the index keeps when the
// input is a stream (stdin cannot be re-read).
#pragma once

#include <simdjson.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

using IdHash = uint64_t (*)(std::string_view id);

uint64_t job_id_hash(std::string_view id);  // 64 bits of the id's text

// The text a JSON id value is compared by: a string as is, an integer in decimal. False (and
// `text` untouched) for any other JSON value. `is_number` tells which of the two it was.
bool id_text(simdjson::dom::element value, std::string& text, bool& is_number);
// The same for an id already parsed with nlohmann::json (manifests, dataset files).
std::string id_text(const nlohmann::json& value);

class JobIdIndex {
 public:
  // The id of the job line `line` that starts at byte `offset` of the jobs file.
  using IdAt = std::function<std::string(int64_t line, uint64_t offset)>;

  // `id_at` re-reads a regular file; leave it empty for a stream, and the index keeps the id
  // texts instead. `hash` is replaceable so that tests can force collisions.
  explicit JobIdIndex(IdAt id_at = nullptr, IdHash hash = job_id_hash);

  // Adds the id of job line `line` (starting at byte `offset`). Returns 0 when no earlier line
  // has this id; otherwise the earlier line, and the id is not added again.
  int64_t add(std::string_view id, int64_t line, uint64_t offset);

  size_t size() const { return entries_.size(); }
  int64_t rereads() const { return rereads_; }  // earlier ids fetched to settle a hash match

 private:
  struct Entry {
    uint64_t hash = 0;
    int64_t line = 0;
    uint64_t where = 0;  // byte offset of the line in the file, or of the id in texts_ (stream)
  };
  std::string id_of(const Entry& e);
  void grow();

  IdAt id_at_;
  IdHash hash_;
  std::deque<Entry> entries_;    // a deque: growing never copies (or doubles) what is held
  std::vector<uint32_t> slots_;  // [power of two]: 1 + index into entries_, 0 = empty
  std::string texts_;            // stream only: each id as a 4-byte length and its bytes
  int64_t rereads_ = 0;
};

}  // namespace loom
