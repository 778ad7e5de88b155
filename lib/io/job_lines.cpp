// The line reader (jobs.h JobReader, job_lines.h) and its diagnostics: lines are read with a
// bounded getline, so neither a huge file nor one enormous line can grow host memory, and
// parsed with simdjson's DOM parser, one reused parser per thread. Whatever is wrong with a line
// becomes one JobError "line N: <what>: expected <...>, found <...>": JSON that does not parse
// (with the offending literal and its field found again here, since simdjson names neither), a
// line too long, an id an earlier line has; what a valid JSON object must hold is the schema's
// business (jobs.cpp).
#include "io/job_lines.h"

#include <fcntl.h>
#include <poll.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string_view>
#include <system_error>

#include "core/error.h"
#include "core/fnv.h"
#include "io/job_ids.h"
#include "io/job_parse.h"
#include "io/jobs.h"

namespace loom {

bool read_job_line(std::istream& in, const std::string& path, std::vector<char>& chunk,
                   size_t max_bytes, std::string& text, bool& too_long, uint64_t& consumed,
                   const std::atomic<bool>* stop) {
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
      if (stop != nullptr && stop->load()) return false;
      continue;
    }
    if (in.eof()) {
      // A stop ends a pipe's read (PollBuf) as the end of input: half a line is not a line.
      if ((got == 0 && !any) || (stop != nullptr && stop->load())) return false;
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

// ---- Diagnostics: what makes a line fail before or beside the schema ---------------------

namespace {

using namespace job_parse;

// ---- Locating what made the DOM parser give up -------------------------------------------

// simdjson reports an out-of-range number (1e999, 2^64) or a bare NaN only as "bad number" or
// "bad structure" for the whole line. This scan finds the offending literal and the key it
// belongs to, so the message can name the field.
struct BadLiteral {
  std::string key;      // last object key before the literal ("" if none)
  std::string literal;  // the literal as written
  bool out_of_range = false;
};

bool find_bad_literal(std::string_view s, BadLiteral& found) {
  std::string last_key, last_string;
  bool after_string = false;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
      last_string = std::string(s.substr(i + 1, std::min(j, s.size()) - i - 1));
      after_string = true;
      i = j + 1;
      continue;
    }
    if (c == ':' && after_string) last_key = last_string;
    if (c != ' ' && c != '\t') after_string = false;
    bool number_start = c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9');
    bool word_start = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    if (!number_start && !word_start) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && (std::isalnum(uint8_t(s[j])) || s[j] == '-' || s[j] == '+' ||
                            s[j] == '.' || s[j] == '_'))
      ++j;
    std::string lit(s.substr(i, j - i));
    i = j;
    if (word_start) {
      if (lit == "true" || lit == "false" || lit == "null") continue;
      found = {last_key, lit, false};
      return true;
    }
    bool integer = lit.find_first_of(".eE") == std::string::npos;
    errno = 0;
    char* end = nullptr;
    if (integer && lit[0] != '+') {
      if (lit[0] == '-') {
        (void)std::strtoll(lit.c_str(), &end, 10);
      } else {
        (void)std::strtoull(lit.c_str(), &end, 10);
      }
    } else {
      double d = std::strtod(lit.c_str(), &end);
      if (errno == ERANGE && std::fabs(d) < 1.0) errno = 0;  // underflow to 0 is fine
    }
    bool malformed = end == nullptr || *end != '\0' || lit[0] == '+' || lit[0] == '.';
    if (errno == ERANGE || malformed) {
      found = {last_key, lit, errno == ERANGE && !malformed};
      return true;
    }
  }
  return false;
}

std::string parse_failure(std::string_view text, simdjson::error_code code) {
  BadLiteral lit;
  if ((code == simdjson::NUMBER_ERROR || code == simdjson::TAPE_ERROR ||
       code == simdjson::T_ATOM_ERROR || code == simdjson::F_ATOM_ERROR ||
       code == simdjson::N_ATOM_ERROR) &&
      find_bad_literal(text, lit)) {
    if (lit.key.empty()) {
      return cat("not valid JSON (unexpected ", lit.literal.substr(0, kShowChars),
                 "): expected one JSON object per line, found ", quoted(text));
    }
    std::string where = cat("field ", quoted(lit.key));
    if (lit.out_of_range)
      return cat(where, ": expected a number that fits in 64 bits (finite, at most ~1.8e308",
                 " and integers within [-2^63, 2^64)), found ", lit.literal);
    return cat(where, ": expected a JSON number, string, true, false or null",
               " (JSON has no NaN or Infinity), found ", lit.literal.substr(0, kShowChars));
  }
  const char* what = simdjson::error_message(code);
  switch (code) {
    case simdjson::TAPE_ERROR:
      what = "broken structure (a missing or extra comma, colon, brace, bracket or quote)";
      break;
    case simdjson::UTF8_ERROR:
      what = "invalid UTF-8";
      break;
    case simdjson::UNCLOSED_STRING:
      what = "a string is not closed";
      break;
    case simdjson::STRING_ERROR:
      what = "bad escape in a string";
      break;
    case simdjson::UNESCAPED_CHARS:
      what = "a control character inside a string";
      break;
    case simdjson::DEPTH_ERROR:
      what = "nested too deeply";
      break;
    default:
      break;
  }
  std::string shown = quoted(text);
  return cat("not valid JSON (", what, "): expected one JSON object per line, found ", shown);
}

bool parse_line(const std::string& text, int64_t line, const ModelSpec& spec,
                const JobDefaults& defaults, Job& job, JobError& error, IdInfo& id) {
  thread_local simdjson::dom::parser parser;
  id = IdInfo{cat("line-", line)};
  auto fill = [&](std::string message) {
    error.id = id.text;
    error.id_is_number = id.is_number;
    error.line = line;
    error.message = cat("line ", line, ": ", message);
  };
  try {
    element root;
    simdjson::error_code code = parser.parse(text).get(root);
    if (code) throw BadLine{parse_failure(text, code)};
    parse_job(root, line, spec, defaults, job, id);
    return true;
  } catch (const BadLine& b) {
    fill(b.message);
  } catch (const simdjson::simdjson_error& e) {  // a type we did not check first: our bug
    fill(cat("internal error reading the job (", e.what(),
             "): expected a valid job, found one loom could not read"));
  }
  return false;
}

// The error that replaces line `line` (whatever else it held) when its id is the id of the
// earlier line `earlier`.
void duplicate_id(const IdInfo& id, int64_t line, int64_t earlier, JobError& error) {
  error.id = id.text;
  error.id_is_number = id.is_number;
  error.line = line;
  if (!id.given) {
    error.message = cat("line ", line, ": without a readable \"id\" this line's id is ",
                        quoted(std::string_view(id.text)), ", which is already the id of line ",
                        earlier, "; expected ids unique within a run");
    return;
  }
  bool digits = id.text.find_first_not_of("-0123456789") == std::string::npos;
  std::string n = id.text.substr(0, kShowChars);
  error.message = cat(
      "line ", line, ": field \"id\": ", id.is_number ? id.text : quoted(std::string_view(id.text)),
      " is already the id of line ", earlier, "; expected ids unique within a run",
      digits ? cat(" (ids are compared as text: ", n, " and \"", n, "\" are the same id)")
             : std::string());
}

}  // namespace

bool parse_job_line(const std::string& text, int64_t line, const ModelSpec& spec,
                    const JobDefaults& defaults, Job& job, JobError& error) {
  IdInfo id;
  return parse_line(text, line, spec, defaults, job, error, id);
}

// ---- JobReader -------------------------------------------------------------------------------

namespace {

// A pipe, FIFO, terminal or device read by poll and read(2), so that no read blocks through a
// stop (JobReader::set_stop): underflow waits in slices of 100 ms and, once the flag is up,
// gives up with the end of input. A filebuf's read blocked until the writer wrote again, and a
// signal's handler restarts it: `loom run --jobs -` whose writer held the pipe open without
// writing, or stopped in the middle of a line, ignored SIGTERM.
class PollBuf : public std::streambuf {
 public:
  PollBuf(int fd, bool own) : fd_(fd), own_(own) { setg(buf_, buf_, buf_); }
  ~PollBuf() override {
    if (own_) ::close(fd_);
  }
  PollBuf(const PollBuf&) = delete;
  PollBuf& operator=(const PollBuf&) = delete;
  const std::atomic<bool>* stop = nullptr;

  // Whether a whole line, the end of input or a full buffer can be read without waiting: what
  // the pipe holds is read into the buffer first. While jobs run, the reader reads only then,
  // so a writer that stops in the middle of a line holds back no step (JobReader::ready).
  bool line_ready() {
    for (;;) {
      const size_t held = size_t(egptr() - gptr());
      if (eof_ || error_ != 0 || std::memchr(gptr(), '\n', held) != nullptr) return true;
      if (held == sizeof buf_) return true;  // a line longer than the buffer: read on
      if (!fill(0)) return false;
    }
  }

 protected:
  int_type underflow() override {
    while (gptr() == egptr()) {
      if (error_ != 0) throw std::system_error(error_, std::generic_category());  // badbit
      if (eof_ || (stop != nullptr && stop->load())) return traits_type::eof();
      fill(stop != nullptr ? 100 : -1);
    }
    return traits_type::to_int_type(*gptr());
  }

 private:
  // One read after the bytes held (moved to the buffer's start) once the pipe is readable
  // within wait_ms (-1: no limit). false: nothing yet (not readable, or interrupted); true:
  // bytes came, or eof_ or error_ was set.
  bool fill(int wait_ms) {
    const size_t held = size_t(egptr() - gptr());
    std::memmove(buf_, gptr(), held);
    setg(buf_, buf_, buf_ + held);
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, wait_ms);
    if (r == 0 || (r < 0 && errno == EINTR)) return false;
    const ssize_t n = ::read(fd_, buf_ + held, sizeof buf_ - held);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) return false;
      error_ = errno;
      return true;
    }
    eof_ = n == 0;
    setg(buf_, buf_, buf_ + held + size_t(n));
    return true;
  }

  int fd_;
  bool own_;
  bool eof_ = false;  // the writer closed (a read took 0 bytes)
  int error_ = 0;     // a failed read's errno, raised by the next underflow
  char buf_[1 << 16];
};

}  // namespace

struct JobReader::Impl {
  std::string path;
  std::ifstream file;             // a regular file
  std::unique_ptr<PollBuf> pipe;  // anything else (stdin included)
  std::unique_ptr<std::istream> pipe_in;
  std::istream* in = nullptr;
  bool regular = false;  // a regular file: the id index re-reads lines instead of keeping ids
  ModelSpec spec;
  JobDefaults defaults;
  int64_t line = 0;     // physical lines consumed, blank ones included
  int64_t records = 0;  // non-blank lines consumed
  uint64_t offset = 0;  // bytes consumed
  int shard_index = 0, shard_count = 1;
  std::string text;  // current line, kMaxJobLineBytes at most
  std::vector<char> chunk = std::vector<char>(size_t(1) << 16);
  const std::atomic<bool>* stop = nullptr;  // set_stop
  JobIdIndex ids;
  std::ifstream reread;  // opened on the first hash match of two ids
  // A regular file is read as it grows (lines appended are jobs), never as it is rewritten:
  // a second descriptor of the same file watches its size and first bytes.
  int watch = -1;
  struct stat seen {};
  std::string head;                  // its first bytes at open (4 KB at most)
  std::string recent;                // the last bytes read (4 KB at most), ending at `offset`
  int64_t cut_line = 0;              // cut_last_line()
  bool paused = false;               // paused()
  uint64_t lines_hash = kFnvOffset;  // lines_hash()

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (watch >= 0) ::close(watch);
  }

  void open_pipe(int fd, bool own) {
    pipe = std::make_unique<PollBuf>(fd, own);
    pipe_in = std::make_unique<std::istream>(pipe.get());
    in = pipe_in.get();
  }

  void start_watch() {
    watch = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (watch < 0 || ::fstat(watch, &seen) != 0) return;
    head.resize(size_t(std::min<off_t>(seen.st_size, 4096)));
    head.resize(size_t(std::max<ssize_t>(::pread(watch, head.data(), head.size(), 0), 0)));
  }

  // Keeps `recent` the last 4 KB read, given the line just read from `start` (its text before
  // trimming; `offset` past its newline, if it had one).
  void note_read(uint64_t start, const std::string& text, bool too_long) {
    if (too_long) {
      recent.clear();  // not kept: the check below then reads back nothing of it
      return;
    }
    recent += text;
    if (offset - start > text.size()) recent += '\n';
    if (recent.size() > 4096) recent.erase(0, recent.size() - 4096);
  }

  // Whether the file grows past `offset` within half a second: a last line without its
  // newline may be half of one still being appended.
  bool grows_past(uint64_t at) const {
    for (int i = 0; i < 50; ++i) {
      struct stat now {};
      if (watch < 0 || ::fstat(watch, &now) != 0) return false;
      if (uint64_t(now.st_size) > at) return true;
      ::usleep(10000);
    }
    return false;
  }

  // Called at each line: once the file changed (size or time), it must still hold what was
  // read of it (no shorter, the same first and last bytes read); else the lines read next are
  // another file's. A rewrite that truncates and outgrows what was read between two lines is
  // caught by the last bytes.
  void check_unchanged() {
    struct stat now {};
    if (watch < 0 || ::fstat(watch, &now) != 0) return;
    if (now.st_size == seen.st_size && now.st_mtim.tv_sec == seen.st_mtim.tv_sec &&
        now.st_mtim.tv_nsec == seen.st_mtim.tv_nsec)
      return;
    LOOM_CHECK(uint64_t(now.st_size) >= offset, "the jobs file ", path,
               " shrank while it was read (", offset, " bytes read, ", uint64_t(now.st_size),
               " now): it was truncated or rewritten; restore it and rerun with --resume");
    std::string first(head.size(), '\0'), last(recent.size(), '\0');
    const bool same = ::pread(watch, first.data(), first.size(), 0) == ssize_t(first.size()) &&
                      first == head &&
                      ::pread(watch, last.data(), last.size(), off_t(offset - recent.size())) ==
                          ssize_t(last.size()) &&
                      last == recent;
    LOOM_CHECK(same, "the jobs file ", path,
               " was rewritten while it was read (bytes it had read changed; lines may only be "
               "appended): restore it and rerun with --resume");
    seen = now;
  }

  void make_index(IdHash hash) {
    JobIdIndex::IdAt id_at;
    if (regular) id_at = [this](int64_t l, uint64_t at) { return id_at_offset(l, at); };
    ids = JobIdIndex(std::move(id_at), hash);
  }

  // The id of job line `l`, read again from byte `at` of the file.
  std::string id_at_offset(int64_t l, uint64_t at) {
    if (!reread.is_open()) {
      reread.open(path, std::ios::binary);
      LOOM_CHECK(reread.is_open(), "cannot read jobs from ", path,
                 " again: ", std::strerror(errno));
    }
    std::string t;
    bool too_long = false;
    reread_job_line(reread, path, at, l, chunk, kMaxJobLineBytes, t, too_long);
    if (too_long) return cat("line-", l);
    Job job;
    JobError error;
    IdInfo id;
    parse_line(t, l, spec, defaults, job, error, id);
    return id.text;
  }
};

JobReader::JobReader(const std::string& path, const ModelSpec& spec, const JobDefaults& defaults)
    : impl_(std::make_unique<Impl>()) {
  check_job_defaults(spec, defaults);
  impl_->path = path;
  impl_->spec = spec;
  impl_->defaults = defaults;
  if (path == "-") {
    impl_->open_pipe(0, false);
    impl_->path = "stdin";
  } else {
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
      fail("cannot read jobs from ", path,
           ": it is a folder; expected a JSONL jobs file, or - "
           "for stdin");
    auto cannot_open = [&] {
      fail("cannot read jobs from ", path, ": ", std::strerror(errno),
           "; check the path (or pass - for stdin)");
    };
    impl_->regular = exists && S_ISREG(st.st_mode);
    if (impl_->regular) {
      impl_->file.open(path, std::ios::binary);
      if (!impl_->file.is_open()) cannot_open();
      impl_->in = &impl_->file;
      impl_->start_watch();
    } else {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) cannot_open();
      impl_->open_pipe(fd, true);
    }
  }
  impl_->make_index(job_id_hash);
}

JobReader::~JobReader() = default;

void JobReader::set_shard(int index, int count) {
  LOOM_CHECK(count >= 1 && index >= 0 && index < count, "shard ", index, "/", count,
             ": expected 0 <= K < N");
  impl_->shard_index = index;
  impl_->shard_count = count;
}

void JobReader::set_stop(const std::atomic<bool>* stop) {
  impl_->stop = stop;
  if (impl_->pipe) impl_->pipe->stop = stop;
}

void JobReader::set_id_hash(uint64_t (*hash)(std::string_view id)) {
  impl_->make_index(hash);
}

bool JobReader::next(Job& job, JobError& error, bool& ok) {
  Impl& m = *impl_;
  bool too_long = false;
  m.paused = false;
  auto given_up = [&](bool got) { return !got && m.stop != nullptr && m.stop->load(); };
  for (bool skipped = false;; skipped = true) {
    // A pipe with nothing more in it after a line of another shard (or a blank one): the next
    // line of this shard may be minutes away, so hand back rather than wait in the read.
    if (skipped && !m.regular && !m.pipe->line_ready()) {
      m.paused = true;
      return false;
    }
    const uint64_t start = m.offset;
    bool got =
        read_job_line(*m.in, m.path, m.chunk, kMaxJobLineBytes, m.text, too_long, m.offset, m.stop);
    // The last line without its newline, in a file being appended to: read the rest of it.
    while (got && m.regular && !too_long && m.offset - start == m.text.size() &&
           m.grows_past(m.offset)) {
      std::string part = std::move(m.text);
      m.in->clear();
      got = read_job_line(*m.in, m.path, m.chunk, kMaxJobLineBytes, m.text, too_long, m.offset,
                          m.stop);
      if (given_up(got)) return false;
      m.text = part + (got ? m.text : std::string());
      too_long = too_long || m.text.size() > kMaxJobLineBytes;
      got = true;
      if (m.offset - start > m.text.size()) break;  // its newline came
    }
    if (given_up(got)) return false;  // a signal inside a line: as at the end of input
    const bool unterminated = got && m.offset - start == m.text.size();
    m.note_read(start, m.text, too_long);
    m.check_unchanged();
    if (!got) return false;
    ++m.line;
    std::string& t = m.text;
    trim_job_line(t, m.line);
    if (!too_long && t.find_first_not_of(" \t\r\f\v") == std::string::npos) continue;
    m.lines_hash =
        fnv1a64(too_long ? std::string_view("(too long)") : std::string_view(t), m.lines_hash);
    int64_t j = m.records++;
    if (j % m.shard_count != m.shard_index) continue;  // another process's job
    IdInfo id{cat("line-", m.line)};
    if (too_long) {
      error.id = id.text;
      error.id_is_number = false;
      error.line = m.line;
      error.message = cat("line ", m.line, ": line too long: expected at most ",
                          kMaxJobLineBytes >> 20, " MiB per job line, found more");
      ok = false;
    } else {
      ok = parse_line(t, m.line, m.spec, m.defaults, job, error, id);
      if (!ok && unterminated && m.regular) {  // half a line, not a bad job: left for later
        m.cut_line = m.line;
        return false;
      }
    }
    if (int64_t earlier = m.ids.add(id.text, m.line, start)) {
      duplicate_id(id, m.line, earlier, error);
      ok = false;
    }
    (ok ? job.line_hash : error.line_hash) = too_long ? 0 : fnv1a64(t);
    return true;
  }
}

bool JobReader::paused() const {
  return impl_->paused;
}

bool JobReader::ready() const {
  return impl_->regular || impl_->pipe->line_ready();
}

int64_t JobReader::lines_read() const {
  return impl_->line;
}
int64_t JobReader::records_read() const {
  return impl_->records;
}
uint64_t JobReader::lines_hash() const {
  return impl_->lines_hash;
}
int64_t JobReader::cut_last_line() const {
  return impl_->cut_line;
}

}  // namespace loom
