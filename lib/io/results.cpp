// Result records (results.h). Keys are written in a fixed, documented order so that files are
// diffable and `loom merge` output is byte-stable:
//   ok:    id, sample, status, line, [tokens_file, rows], frames | tokens, [finish_reason],
//          prompt_slots, cached_slots, timing {queue_s, prefill_s, decode_s, total_s, [frame_s]}
//   error: id, status, line, error
// Each record is one fputs + fflush: a crash can tear at most the line being written, which
// resume.h detects and drops.
#include "io/results.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fnv.h"

namespace loom {

nlohmann::ordered_json id_value(const JobResult& r) {
  if (!r.id_is_number) return r.id;
  const char* s = r.id.c_str();
  const bool negative = s[0] == '-';
  char* end = nullptr;
  errno = 0;
  const int64_t i = negative ? std::strtoll(s, &end, 10) : 0;
  const uint64_t u = negative ? 0 : std::strtoull(s, &end, 10);
  LOOM_CHECK(std::isdigit(uint8_t(s[negative ? 1 : 0])) && *end == '\0' && errno == 0, "job id \"",
             r.id, "\" (line ", r.line, ") is marked a number but is not an integer");
  return negative ? nlohmann::ordered_json(i) : nlohmann::ordered_json(u);
}

std::string result_to_json(const JobResult& r) {
  nlohmann::ordered_json j;
  j["id"] = id_value(r);
  if (!r.ok) {
    j["status"] = "error";
    j["line"] = r.line;
    if (r.line_hash != 0) j["line_hash"] = hex64(r.line_hash);
    j["error"] = r.error;
  } else {
    j["sample"] = r.sample;
    j["status"] = "ok";
    j["line"] = r.line;
    if (r.line_hash != 0) j["line_hash"] = hex64(r.line_hash);
    if (!r.tokens_file.empty()) {
      j["tokens_file"] = r.tokens_file;
      j["rows"] = {r.row_begin, r.row_end};
    }
    if (r.has_frames) {
      if (r.include_tokens) j["frames"] = r.frames;
    } else {
      if (r.include_tokens) j["tokens"] = r.tokens;
      j["finish_reason"] = r.finish_reason;
    }
    j["prompt_slots"] = r.prompt_slots;
    j["cached_slots"] = r.cached_slots;
    nlohmann::ordered_json t;
    t["queue_s"] = r.queue_s;
    t["prefill_s"] = r.prefill_s;
    t["decode_s"] = r.decode_s;
    t["total_s"] = r.total_s;
    if (r.has_frames) t["frame_s"] = r.frame_s;
    j["timing"] = std::move(t);
  }
  // An error message may quote bytes of a job line that were not UTF-8; replace them (U+FFFD)
  // rather than throw while reporting someone else's mistake.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ResultWriter::ResultWriter(const std::string& path, bool append) : path_(path) {
  if (path == "-") {
    f_ = stdout;
    path_ = "stdout";
    return;
  }
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f_) {
    fail("cannot write results to ", path, ": ", std::strerror(errno),
         "; check the directory exists and is writable");
  }
  owned_ = true;
}

ResultWriter::~ResultWriter() {
  if (!f_) return;
  std::fflush(f_);
  if (owned_) {
    ::fsync(fileno(f_));
    std::fclose(f_);
  }
}

void ResultWriter::write_failed() const {
  const int err = errno;
  fail("cannot write results to ", path_, ": ", std::strerror(err),
       err == EPIPE ? "; the reader of the pipe closed it"
                    : "; check free space and that the file is writable");
}

void ResultWriter::write(const JobResult& r) {
  std::string line = result_to_json(r);
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    write_failed();
}

void ResultWriter::sync() {
  if (std::fflush(f_) != 0) write_failed();
  // fsync on a pipe or terminal fails with EINVAL: there is nothing to make durable there.
  if (owned_ && ::fsync(fileno(f_)) != 0 && errno != EINVAL && errno != EROFS) {
    fail("cannot sync results to ", path_, ": ", std::strerror(errno));
  }
}

}  // namespace loom
