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

namespace loom {

bool ResumeState::done(const std::string& id, uint32_t sample) const {
  auto it = ok_samples.find(id);
  if (it == ok_samples.end()) return false;
  return std::find(it->second.begin(), it->second.end(), sample) != it->second.end();
}

bool ResumeState::failed(const std::string& id) const {
  return error_ids.count(id) != 0;
}

namespace {

// Reads one record; returns false (with `why`) when the line is not a result record.
bool read_record(simdjson::dom::parser& parser, const std::string& text, ResumeState& st,
                 std::string& why) {
  simdjson::dom::element root;
  if (auto code = parser.parse(text).get(root)) {
    why = std::string("not valid JSON (") + simdjson::error_message(code) + ")";
    return false;
  }
  std::string_view id, status;
  if (root["id"].get(id) || root["status"].get(status)) {
    why = "expected a result record with string fields \"id\" and \"status\"";
    return false;
  }
  if (status == "ok") {
    uint64_t sample = 0;
    if (root["sample"].get(sample) || sample > UINT32_MAX) {
      why = "expected an \"ok\" record to carry an integer \"sample\"";
      return false;
    }
    st.ok_samples[std::string(id)].push_back(uint32_t(sample));
    ++st.ok_records;
  } else if (status == "error") {
    st.error_ids.insert(std::string(id));
    ++st.error_records;
  } else {
    why = cat("expected \"status\" \"ok\" or \"error\", found \"", status.substr(0, 40), "\"");
    return false;
  }
  return true;
}

}  // namespace

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
    } else if (!read_record(parser, text, st, why)) {
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
