// scan_results (resume.h). The file is read line by line (records can be large; the file is
// never held whole). A line counts only when it ends with '\n' and parses; the first line
// that fails either test must be the last one in the file, else the file is not one loom
// wrote (or was edited) and resuming into it would hide that.
#include "io/resume.h"

#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/fnv.h"
#include "io/job_ids.h"

namespace loom {

namespace {

// An id as a message shows it.
std::string show(const std::string& id) {
  return "\"" + (id.size() > 40 ? id.substr(0, 40) + "..." : id) + "\"";
}

// The id of the record that starts at byte `offset` of `path`, read again for a message.
std::string record_id_at(const std::string& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(std::streamoff(offset));
  std::string text, id;
  bool is_number = false;
  simdjson::dom::parser parser;
  simdjson::dom::element root, value;
  if (!std::getline(in, text) || parser.parse(text).get(root) || root["id"].get(value) ||
      !id_text(value, id, is_number)) {
    return "(unreadable)";
  }
  return id;
}

// Reads the record on line `file_line` (at byte `offset`); returns false (with `why`) when the
// line is not a result record.
bool read_record(simdjson::dom::parser& parser, const std::string& text, int64_t file_line,
                 uint64_t offset, ResumeState& st, std::string& why) {
  simdjson::dom::element root, id_value;
  if (auto code = parser.parse(text).get(root)) {
    why = std::string("not valid JSON (") + simdjson::error_message(code) + ")";
    return false;
  }
  std::string id;
  bool is_number = false;
  std::string_view status;
  int64_t line = 0;
  if (root["id"].get(id_value) || !id_text(id_value, id, is_number) || root["status"].get(status) ||
      root["line"].get(line)) {
    why =
        "expected a result record with fields \"id\" (a string or an integer), \"status\" "
        "and \"line\"";
    return false;
  }
  uint64_t sample = 0;
  if (status == "ok" && (root["sample"].get(sample) || sample > UINT32_MAX)) {
    why = "expected an \"ok\" record to carry an integer \"sample\"";
    return false;
  }
  if (status != "ok" && status != "error") {
    why = cat("expected \"status\" \"ok\" or \"error\", found \"", status.substr(0, 40), "\"");
    return false;
  }
  const uint64_t h = job_id_hash(id);
  std::string_view line_hash_text;
  uint64_t line_hash = 0;
  if (!root["line_hash"].get(line_hash_text) && !parse_hex64(line_hash_text, line_hash)) {
    why = "expected \"line_hash\" to be 16 hex digits";
    return false;
  }
  auto [it, added] = st.lines.try_emplace(line);
  ResumeState::LineRecords& rec = it->second;
  if (added) {
    rec.id_hash = h;
    rec.offset = offset;
    rec.line_hash = line_hash;
  } else if (rec.id_hash != h) {  // a whole record, not a torn one: never cut off
    fail("results file ", st.path, " line ", file_line, ": a record for job line ", line,
         " with id ", show(id), ", but an earlier record for that job line has id ",
         show(record_id_at(st.path, rec.offset)),
         "; the file mixes the results of different jobs files. Write to a new --out");
  }
  if (status == "ok") {
    rec.samples.push_back(uint32_t(sample));
    ++st.ok_records;
  } else {
    rec.failed = true;
    ++st.error_records;
  }
  return true;
}

}  // namespace

bool ResumeState::done(int64_t line, uint32_t sample) const {
  auto it = lines.find(line);
  if (it == lines.end()) return false;
  const std::vector<uint32_t>& s = it->second.samples;
  return std::find(s.begin(), s.end(), sample) != s.end();
}

bool ResumeState::failed(int64_t line) const {
  auto it = lines.find(line);
  return it != lines.end() && it->second.failed;
}

void ResumeState::match_line(int64_t line, const std::string& id, uint64_t line_hash) {
  auto it = lines.find(line);
  if (it == lines.end()) return;  // not run yet
  LineRecords& rec = it->second;
  if (rec.id_hash != job_id_hash(id)) {
    fail("results file ", path, " has a record for line ", line, " with id ",
         show(record_id_at(path, rec.offset)), ", but the jobs file's line ", line, " has id ",
         show(id), "; --resume needs the same jobs file (or write to a new --out)");
  }
  if (rec.line_hash != 0 && line_hash != 0 && rec.line_hash != line_hash) {
    fail("results file ", path, " has records for line ", line, " (id ", show(id),
         ") made from another text of that line (line_hash ", hex64(rec.line_hash),
         ", the jobs file's is ", hex64(line_hash),
         "); --resume needs the same jobs file (or write to a new --out)");
  }
  rec.matched = true;
}

void ResumeState::check_all_matched(const std::string& jobs_path) const {
  int64_t first = 0, more = 0;
  for (const auto& [line, rec] : lines) {
    if (rec.matched) continue;
    if (first != 0) ++more;
    if (first == 0 || line < first) first = line;
  }
  if (first == 0) return;
  fail("results file ", path, " has a record for line ", first, " with id ",
       show(record_id_at(path, lines.at(first).offset)), ", but the jobs this run read from ",
       jobs_path == "-" ? std::string("stdin") : jobs_path, " have no job on line ", first,
       more > 0 ? cat(" (nor on ", more, " more lines with records)") : std::string(),
       "; --resume needs the same jobs file (or write to a new --out)");
}

ResumeState scan_results(const std::string& path) {
  LOOM_CHECK(path != "-",
             "--resume needs a results file to append to, not stdout; pass --out FILE");
  ResumeState st;
  st.path = path;
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) {
    LOOM_CHECK(errno == ENOENT, "cannot read results file ", path,
               " to resume: ", std::strerror(errno));
    return st;  // nothing written yet
  }
  st.existed = true;
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in.is_open(), "cannot read results file ", path, " to resume: ", std::strerror(errno));

  simdjson::dom::parser parser;
  std::string text, why;
  int64_t line = 0;
  uint64_t good_end = 0;  // byte offset just past the last good line
  uint64_t offset = 0;    // byte offset of the current line
  int64_t bad_line = 0;   // a line that failed; fine only if nothing follows it
  std::string bad_why;
  while (std::getline(in, text)) {
    ++line;
    bool complete = !in.eof();  // getline stopped at '\n', not at the end of the file
    uint64_t next = offset + text.size() + (complete ? 1 : 0);
    bool blank = text.find_first_not_of(" \t\r") == std::string::npos;
    if (bad_line != 0 && !(blank && complete)) {
      fail("results file ", path, " line ", bad_line, ": ", bad_why,
           "; only the last line may be torn. Fix or remove that line, or write to a new --out");
    }
    if (blank && complete) {
      if (bad_line == 0) good_end = next;
    } else if (!complete) {
      bad_line = line;
      bad_why = "torn line (no newline at its end)";
    } else if (!read_record(parser, text, line, offset, st, why)) {
      bad_line = line;
      bad_why = why;
    } else {
      good_end = next;
    }
    offset = next;
  }
  LOOM_CHECK(!in.bad(), "cannot read results file ", path, ": ", std::strerror(errno));
  if (bad_line != 0) {
    st.dropped_line = bad_line;
    st.dropped_bytes = int64_t(offset - good_end);
    if (::truncate(path.c_str(), off_t(good_end)) != 0) {
      fail("cannot cut the torn last line (line ", bad_line, ") off ", path, ": ",
           std::strerror(errno), "; check the file is writable");
    }
  }
  return st;
}

}  // namespace loom
