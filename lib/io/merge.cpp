// merge_results (merge.h). Three passes: index every input record (id, line, sample, where its
// bytes are), check the index (duplicates; the jobs file's lines against the records), then
// copy the records' bytes in (line, sample) order into a temporary file renamed over out_path.
#include "io/merge.h"

#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/error.h"

namespace loom {
namespace {

struct Rec {
  std::string id;
  int64_t line = 0;     // job line the record answers
  int64_t sample = -1;  // -1: an error record
  uint32_t file = 0;    // input index
  int64_t file_line = 0;
  uint64_t offset = 0;  // bytes [offset, offset + len) of the record in its file, no newline
  uint32_t len = 0;
};

std::string where(const std::vector<std::string>& inputs, const Rec& r) {
  return cat(inputs[r.file], " line ", r.file_line);
}

void index_file(const std::vector<std::string>& inputs, uint32_t f, std::vector<Rec>& recs,
                simdjson::dom::parser& parser) {
  const std::string& path = inputs[f];
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in.is_open(), "cannot read results file ", path, ": ", std::strerror(errno));
  std::string text;
  uint64_t offset = 0;
  int64_t n = 0;
  while (std::getline(in, text)) {
    ++n;
    bool complete = !in.eof();
    uint64_t start = offset;
    offset += text.size() + (complete ? 1 : 0);
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto bad = [&](const std::string& why) {
      fail("results file ", path, " line ", n, ": ", why,
           "; if that shard's run was killed, finish it with `loom run --resume` first");
    };
    if (!complete) bad("torn line (no newline at its end)");
    LOOM_CHECK(text.size() <= UINT32_MAX, "results file ", path, " line ", n, ": record too long");
    simdjson::dom::element root;
    if (auto code = parser.parse(text).get(root)) {
      bad(cat("not valid JSON (", simdjson::error_message(code), ")"));
    }
    std::string_view id, status;
    int64_t line = 0;
    if (root["id"].get(id) || root["status"].get(status) || root["line"].get(line)) {
      bad("expected a result record with \"id\", \"status\" and \"line\"");
    }
    Rec r;
    r.id = std::string(id);
    r.line = line;
    r.file = f;
    r.file_line = n;
    r.offset = start;
    r.len = uint32_t(text.size());
    if (status == "ok") {
      uint64_t sample = 0;
      if (root["sample"].get(sample) || sample > UINT32_MAX) {
        bad("expected an \"ok\" record to carry an integer \"sample\"");
      }
      r.sample = int64_t(sample);
    } else if (status != "error") {
      bad(cat("expected \"status\" \"ok\" or \"error\", found \"", status.substr(0, 40), "\""));
    }
    recs.push_back(std::move(r));
  }
  LOOM_CHECK(!in.bad(), "cannot read results file ", path, ": ", std::strerror(errno));
}

void check_duplicates(const std::vector<std::string>& inputs, std::vector<Rec>& recs) {
  std::vector<const Rec*> by_id(recs.size());
  for (size_t i = 0; i < recs.size(); ++i) by_id[i] = &recs[i];
  std::sort(by_id.begin(), by_id.end(), [](const Rec* a, const Rec* b) {
    return std::tie(a->id, a->sample, a->file, a->file_line) <
           std::tie(b->id, b->sample, b->file, b->file_line);
  });
  for (size_t i = 1; i < by_id.size(); ++i) {
    const Rec& a = *by_id[i - 1];
    const Rec& b = *by_id[i];
    if (a.id != b.id) continue;
    if (a.sample == b.sample) {
      fail("duplicate record for job id \"", a.id, "\"",
           a.sample >= 0 ? cat(" sample ", a.sample) : std::string(" (error)"), " in ",
           where(inputs, a), " and ", where(inputs, b),
           "; job ids must be unique and each shard merged once");
    }
    if (a.sample < 0) {  // sorted first: an error record beside ok records
      fail("job id \"", a.id, "\" has both an error record (", where(inputs, a),
           ") and ok records (", where(inputs, b), "); job ids must be unique");
    }
  }
}

// The id and num_samples a job line asks for, as far as they can be read; a line that does
// not parse was answered with an error record whose id is "line-N".
void job_id_and_samples(simdjson::dom::parser& parser, const std::string& text, int64_t line,
                        std::string& id, int64_t& samples) {
  id = cat("line-", line);
  samples = 1;
  simdjson::dom::element root;
  if (parser.parse(text).get(root)) return;
  std::string_view s;
  int64_t i = 0;
  uint64_t u = 0;
  if (!root["id"].get(s)) {
    if (!s.empty()) id = std::string(s);  // an empty id is an error record "line-N"
  } else if (!root["id"].get(i)) {
    id = std::to_string(i);
  } else if (!root["id"].get(u)) {
    id = std::to_string(u);
  }
  int64_t n = 0;
  if (!root["num_samples"].get(n) && n >= 1) samples = n;
}

// Walks the jobs file beside the records sorted by (line, sample).
int64_t check_against_jobs(const std::vector<std::string>& inputs, const std::vector<Rec>& recs,
                           const std::string& jobs_path, simdjson::dom::parser& parser) {
  std::ifstream in(jobs_path, std::ios::binary);
  LOOM_CHECK(in.is_open(), "cannot read jobs file ", jobs_path, ": ", std::strerror(errno));
  std::string text, id;
  int64_t line = 0, jobs = 0, missing = 0;
  std::string first_missing;
  size_t r = 0;
  auto stray = [&](const Rec& rec) {
    fail("record for job id \"", rec.id, "\" (", where(inputs, rec), ") answers line ", rec.line,
         ", but ", jobs_path, " has no job on that line; were these results made from it?");
  };
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (line == 1 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // as JobReader
    if (text.find_first_not_of(" \t\r\f\v") == std::string::npos) continue;
    ++jobs;
    for (; r < recs.size() && recs[r].line < line; ++r) stray(recs[r]);
    size_t begin = r;
    for (; r < recs.size() && recs[r].line == line; ++r) {
    }
    int64_t samples = 1;
    job_id_and_samples(parser, text, line, id, samples);
    if (begin == r) {
      if (missing++ == 0) first_missing = cat("job id \"", id, "\" (line ", line, ")");
      continue;
    }
    for (size_t i = begin; i < r; ++i) {
      if (recs[i].id != id) {
        fail("record for line ", line, " (", where(inputs, recs[i]), ") has id \"", recs[i].id,
             "\" but ", jobs_path, " line ", line, " has id \"", id,
             "\"; were these results made from this jobs file?");
      }
    }
    if (recs[begin].sample < 0) continue;  // an error record answers the whole job
    bool complete = int64_t(r - begin) == samples;
    for (size_t i = begin; complete && i < r; ++i) complete = recs[i].sample == int64_t(i - begin);
    if (!complete) {
      std::string found;
      for (size_t i = begin; i < r; ++i) found += cat(i > begin ? ", " : "", recs[i].sample);
      fail("missing results for job id \"", id, "\" (line ", line, "): expected samples 0..",
           samples - 1, ", found ", found);
    }
  }
  if (r < recs.size()) stray(recs[r]);
  if (missing > 0) {
    fail("missing results for ", first_missing,
         missing > 1 ? cat(" and ", missing - 1, " more jobs") : std::string(),
         "; run the missing shards (or `loom run --resume` them) and merge again");
  }
  return jobs;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

MergeCounts merge_results(const std::vector<std::string>& inputs, const std::string& jobs_path,
                          const std::string& out_path) {
  LOOM_CHECK(!inputs.empty(), "merge: expected at least one results file, found none");
  for (const std::string& in : inputs) {
    LOOM_CHECK(!same_file(in, out_path), "merge: --out ", out_path, " is also an input (", in,
               "); write the merged file somewhere else");
  }
  MergeCounts counts;
  simdjson::dom::parser parser;
  std::vector<Rec> recs;
  for (uint32_t f = 0; f < inputs.size(); ++f) index_file(inputs, f, recs, parser);
  counts.files = int64_t(inputs.size());
  check_duplicates(inputs, recs);
  std::sort(recs.begin(), recs.end(), [](const Rec& a, const Rec& b) {
    return std::tie(a.line, a.sample, a.file, a.offset) <
           std::tie(b.line, b.sample, b.file, b.offset);
  });
  if (!jobs_path.empty()) counts.jobs = check_against_jobs(inputs, recs, jobs_path, parser);

  // Copy the records, in order, into a file renamed over out_path when complete.
  bool to_stdout = out_path == "-";
  std::string tmp = to_stdout ? "" : out_path + ".merging";
  std::FILE* out = to_stdout ? stdout : std::fopen(tmp.c_str(), "w");
  LOOM_CHECK(out, "cannot write merged results to ", out_path, ": ", std::strerror(errno),
             "; check the directory exists and is writable");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(to_stdout ? nullptr : out, std::fclose);
  std::vector<std::ifstream> files;
  for (const std::string& in : inputs) files.emplace_back(in, std::ios::binary);
  std::string buf;
  for (const Rec& r : recs) {
    buf.resize(r.len);
    std::ifstream& f = files[r.file];
    f.seekg(std::streamoff(r.offset));
    f.read(buf.data(), std::streamsize(r.len));
    LOOM_CHECK(f.gcount() == std::streamsize(r.len), "results file ", inputs[r.file],
               " changed while merging (", where(inputs, r), ")");
    buf += '\n';
    if (std::fwrite(buf.data(), 1, buf.size(), out) != buf.size()) {
      ::unlink(tmp.c_str());
      fail("cannot write merged results to ", out_path, ": ", std::strerror(errno));
    }
    ++counts.records;
    ++(r.sample >= 0 ? counts.ok : counts.errors);
  }
  if (std::fflush(out) != 0 || (!to_stdout && ::fsync(fileno(out)) != 0)) {
    if (!to_stdout) ::unlink(tmp.c_str());
    fail("cannot write merged results to ", out_path, ": ", std::strerror(errno));
  }
  if (!to_stdout) {
    closer.reset();
    if (std::rename(tmp.c_str(), out_path.c_str()) != 0) {
      ::unlink(tmp.c_str());
      fail("cannot write merged results to ", out_path, ": ", std::strerror(errno));
    }
  }
  return counts;
}

}  // namespace loom
