// read_job_line, trim_job_line, reread_job_line (job_lines.h).
#include "io/job_lines.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace loom {

bool read_job_line(std::istream& in, const std::string& path, std::vector<char>& chunk,
                   size_t max_bytes, std::string& text, bool& too_long, uint64_t& consumed) {
  text.clear();
  too_long = false;
  bool any = false;
  auto append = [&](std::streamsize n) {
    if (too_long || n <= 0) return;
    if (text.size() + size_t(n) > max_bytes) {
      too_long = true;
      return;
    }
    text.append(chunk.data(), size_t(n));
  };
  for (;;) {
    in.getline(chunk.data(), std::streamsize(chunk.size()));
    std::streamsize got = in.gcount();
    consumed += uint64_t(got);
    if (in.bad()) fail("cannot read jobs from ", path, ": ", std::strerror(errno));
    if (in.fail() && !in.eof()) {  // chunk full, no newline yet
      in.clear();
      append(got);
      any = true;
      continue;
    }
    if (in.eof()) {
      if (got == 0 && !any) return false;
      append(got);
      in.clear(std::ios::eofbit);
      return true;
    }
    append(got - 1);  // `got` counts the newline
    return true;
  }
}

void trim_job_line(std::string& text, int64_t line) {
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (line == 1 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // UTF-8 BOM
}

void reread_job_line(std::istream& in, const std::string& path, uint64_t offset, int64_t line,
                     std::vector<char>& chunk, size_t max_bytes, std::string& text,
                     bool& too_long) {
  in.clear();
  in.seekg(std::streamoff(offset));
  uint64_t consumed = 0;
  LOOM_CHECK(in.good() && read_job_line(in, path, chunk, max_bytes, text, too_long, consumed),
             "the jobs file changed while it was read: line ", line,
             " is gone; do not edit a jobs file during a run");
  trim_job_line(text, line);
}

}  // namespace loom
