// merge_results (merge.h). Check the inputs' shard names, then three passes: index every input
// record (id hash, line, sample, where its bytes are), check the index (duplicates; the jobs
// file's lines against the records), then copy the records' bytes in (line, sample) order
// into a temporary file renamed over out_path.
#include "io/merge.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <regex>

#include "core/error.h"
#include "core/fnv.h"
#include "io/dataset_file.h"
#include "io/job_ids.h"
#include "io/outputs.h"
#include "io/sidecar.h"

namespace loom {
namespace {

struct Rec {
  uint64_t id_hash = 0;    // job_id_hash of the id's text
  int64_t line = 0;        // job line the record answers
  int64_t sample = -1;     // -1: an error record
  uint64_t line_hash = 0;  // the job line's text ("line_hash"; 0: the record has none)
  int64_t file_line = 0;
  uint64_t offset = 0;  // bytes [offset, offset + len) of the record in its file, no newline
  uint32_t file = 0;    // input index
  uint32_t len = 0;
};

// The inputs, opened to read records back: to copy them, and to read an id whose hash matched
// another's or that a message quotes.
class Inputs {
 public:
  Inputs(const std::vector<std::string>& paths, IdHash hash) : paths_(paths), hash_(hash) {
    for (const std::string& p : paths) files_.emplace_back(p, std::ios::binary);
  }
  uint64_t hash(std::string_view id) const { return hash_(id); }
  const std::string& path(const Rec& r) const { return paths_[r.file]; }
  std::string where(const Rec& r) const { return cat(paths_[r.file], " line ", r.file_line); }

  // The record's bytes, without the newline.
  const std::string& bytes(const Rec& r) {
    buf_.resize(r.len);
    std::ifstream& f = files_[r.file];
    f.clear();
    f.seekg(std::streamoff(r.offset));
    f.read(buf_.data(), std::streamsize(r.len));
    LOOM_CHECK(f.gcount() == std::streamsize(r.len), "results file ", path(r),
               " changed while merging (", where(r), ")");
    return buf_;
  }

  std::string id(const Rec& r) {
    simdjson::dom::element root, value;
    std::string text;
    bool is_number = false;
    bool read = !parser_.parse(bytes(r)).get(root) && !root["id"].get(value) &&
                id_text(value, text, is_number) && hash_(text) == r.id_hash;
    LOOM_CHECK(read, "results file ", path(r), " changed while merging (", where(r), ")");
    return text;
  }

 private:
  const std::vector<std::string>& paths_;
  IdHash hash_;
  std::vector<std::ifstream> files_;
  std::string buf_;
  simdjson::dom::parser parser_;
};

void index_file(const std::vector<std::string>& inputs, uint32_t f, IdHash hash,
                std::vector<Rec>& recs, simdjson::dom::parser& parser) {
  const std::string& path = inputs[f];
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in.is_open(), "cannot read results file ", path, ": ", std::strerror(errno));
  std::string text, id;
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
    simdjson::dom::element root, id_value;
    if (auto code = parser.parse(text).get(root)) {
      bad(cat("not valid JSON (", simdjson::error_message(code), ")"));
    }
    std::string_view status;
    bool is_number = false;
    int64_t line = 0;
    if (root["id"].get(id_value) || !id_text(id_value, id, is_number) ||
        root["status"].get(status) || root["line"].get(line)) {
      bad("expected a result record with \"id\", \"status\" and \"line\"");
    }
    Rec r;
    r.id_hash = hash(id);
    r.line = line;
    std::string_view line_hash;
    if (!root["line_hash"].get(line_hash) && !parse_hex64(line_hash, r.line_hash))
      bad("expected \"line_hash\" to be 16 hex digits");
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
    recs.push_back(r);
  }
  LOOM_CHECK(!in.bad(), "cannot read results file ", path, ": ", std::strerror(errno));
}

// ---- Shard names ------------------------------------------------------------------------------

// Inputs named `*.shard-K-of-N.*` (shard_path) must be one whole set: one N, each K once.
void check_shard_set(const std::vector<std::string>& inputs, bool allow_partial,
                     MergeCounts& counts) {
  static const std::regex name(R"(\.shard-(\d{1,10})-of-(\d{1,10})(\.[^/]*)?$)");
  std::map<int64_t, size_t> given;  // K → input
  size_t first = inputs.size();     // the input that set N
  int64_t n = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(inputs[i], m, name)) continue;
    const int64_t k = std::stoll(m[1]), this_n = std::stoll(m[2]);
    LOOM_CHECK(k < this_n && this_n <= INT32_MAX, "merge: ", inputs[i], " is named shard ", k,
               " of ", this_n, ", which no run writes; expected 0 <= K < N");
    if (first == inputs.size()) {
      first = i;
      n = this_n;
    }
    LOOM_CHECK(this_n == n, "merge: ", inputs[first], " is a shard of ", n, " but ", inputs[i],
               " is a shard of ", this_n, "; merge the shards of one run");
    auto [it, added] = given.emplace(k, i);
    LOOM_CHECK(added, "merge: shard ", k, " of ", n, " is given twice (", inputs[it->second],
               " and ", inputs[i], "); merge each shard once");
  }
  if (n == 0) return;
  counts.shard_count = int(n);
  counts.missing_shard_count = n - int64_t(given.size());
  for (int64_t k = 0; k < n && counts.missing_shards.size() < MergeCounts::kListedShards; ++k)
    if (!given.count(k)) counts.missing_shards.push_back(int(k));
  if (counts.missing_shard_count == 0 || allow_partial) return;
  std::string list;
  for (size_t i = 0; i < counts.missing_shards.size() && i < 10; ++i)
    list += cat(i ? ", " : "", counts.missing_shards[i]);
  if (counts.missing_shard_count > 10)
    list += cat(" and ", counts.missing_shard_count - 10, " more");
  fail("merge: ", counts.missing_shard_count == 1 ? "shard " : "shards ", list, " of ", n,
       counts.missing_shard_count == 1 ? " is" : " are",
       " missing; merge every shard of the run, or pass --allow-partial to merge what there is");
}

// ---- Duplicates -------------------------------------------------------------------------------

// Two records that cannot both stand, and the message saying why.
struct Conflict {
  const Rec* a = nullptr;  // the one earlier in the inputs
  const Rec* b = nullptr;
  int kind = 0;  // 1: the same (id, sample); 2: an error record before ok records; 3: ok
                 // records of one id on two job lines
  bool before(const Conflict& o) const {
    auto key = [](const Conflict& c) {
      return std::make_tuple(c.a->file, c.a->file_line, c.b->file, c.b->file_line);
    };
    return !o.a || key(*this) < key(o);
  }
};

// The first conflict (in input order) among records of one id, sorted by (sample, line, file,
// file_line). A run turns a line whose id an earlier line has into an error record, so error
// records on lines after the id's ok line are not a conflict.
Conflict find_conflict(const std::vector<const Rec*>& rs) {
  Conflict best;
  auto offer = [&](const Rec* x, const Rec* y, int kind) {
    if (std::tie(y->file, y->file_line) < std::tie(x->file, x->file_line)) std::swap(x, y);
    if (kind == 2 && x->sample >= 0) std::swap(x, y);  // the message names the error first
    Conflict c{x, y, kind};
    if (c.before(best)) best = c;
  };
  const Rec *first_ok = nullptr, *last_ok = nullptr;  // by line
  for (size_t i = 0; i < rs.size(); ++i) {
    const Rec* r = rs[i];
    if (i > 0 && rs[i - 1]->sample == r->sample && (r->sample >= 0 || rs[i - 1]->line == r->line))
      offer(rs[i - 1], r, 1);
    if (r->sample < 0) continue;
    if (!first_ok || r->line < first_ok->line) first_ok = r;
    if (!last_ok || r->line > last_ok->line) last_ok = r;
  }
  if (best.a) return best;
  for (const Rec* r : rs)
    if (r->sample < 0 && last_ok && r->line <= last_ok->line) offer(r, last_ok, 2);
  if (!best.a && first_ok && first_ok->line != last_ok->line) offer(first_ok, last_ok, 3);
  return best;
}

// Sorts `recs` by id hash. Records with equal hashes are taken for one id only when that finds
// no conflict; otherwise their real ids are read and each id is checked on its own.
void check_duplicates(Inputs& in, std::vector<Rec>& recs) {
  std::sort(recs.begin(), recs.end(), [](const Rec& a, const Rec& b) {
    return std::tie(a.id_hash, a.sample, a.line, a.file, a.file_line) <
           std::tie(b.id_hash, b.sample, b.line, b.file, b.file_line);
  });
  Conflict best;
  std::string best_id;
  std::vector<const Rec*> group;
  for (size_t i = 0, j = 0; i < recs.size(); i = j) {
    for (j = i; j < recs.size() && recs[j].id_hash == recs[i].id_hash; ++j) {
    }
    group.clear();
    for (size_t k = i; k < j; ++k) group.push_back(&recs[k]);
    if (!find_conflict(group).a) continue;
    std::vector<std::pair<std::string, const Rec*>> ids;  // (real id, record)
    for (const Rec* r : group) ids.emplace_back(in.id(*r), r);
    std::stable_sort(ids.begin(), ids.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t a = 0, b = 0; a < ids.size(); a = b) {
      group.clear();
      for (b = a; b < ids.size() && ids[b].first == ids[a].first; ++b)
        group.push_back(ids[b].second);
      Conflict c = find_conflict(group);
      if (c.a && c.before(best)) {
        best = c;
        best_id = ids[a].first;
      }
    }
  }
  if (!best.a) return;
  const Rec &a = *best.a, &b = *best.b;
  if (best.kind == 1) {
    fail("duplicate record for job id \"", best_id, "\"",
         a.sample >= 0 ? cat(" sample ", a.sample) : std::string(" (error)"), " in ", in.where(a),
         " and ", in.where(b), "; job ids must be unique and each shard merged once");
  }
  if (best.kind == 2) {
    fail("job id \"", best_id, "\" has both an error record (", in.where(a), ") and ok records (",
         in.where(b), "); job ids must be unique");
  }
  fail("job id \"", best_id, "\" has ok records for two job lines, ", a.line, " (", in.where(a),
       ") and ", b.line, " (", in.where(b), "); job ids must be unique");
}

// ---- The jobs file ----------------------------------------------------------------------------

// The id and num_samples a job line asks for, as far as they can be read; a line that does
// not parse was answered with an error record whose id is "line-N".
void job_id_and_samples(simdjson::dom::parser& parser, const std::string& text, int64_t line,
                        std::string& id, int64_t& samples) {
  id = cat("line-", line);
  samples = 1;
  simdjson::dom::element root, value;
  if (parser.parse(text).get(root)) return;
  std::string s;
  bool is_number = false;
  if (!root["id"].get(value) && id_text(value, s, is_number) && !s.empty()) {
    id = s;  // an empty id is an error record "line-N"
  }
  int64_t n = 0;
  if (!root["num_samples"].get(n) && n >= 1) samples = n;
}

void note_missing(MergeCounts& counts, int64_t line, const std::string& id,
                  std::vector<int64_t> samples) {
  if (counts.first_missing.size() < MergeCounts::kListedMissing)
    counts.first_missing.push_back(MissingJob{line, id, std::move(samples)});
}

// Walks the jobs file beside the records sorted by (line, sample).
int64_t check_against_jobs(Inputs& in, const std::vector<Rec>& recs, const std::string& jobs_path,
                           bool allow_partial, simdjson::dom::parser& parser, MergeCounts& counts) {
  std::ifstream jobs(jobs_path, std::ios::binary);
  LOOM_CHECK(jobs.is_open(), "cannot read jobs file ", jobs_path, ": ", std::strerror(errno));
  std::string text, id;
  int64_t line = 0, n_jobs = 0;
  size_t r = 0;
  auto stray = [&](const Rec& rec) {
    fail("record for job id \"", in.id(rec), "\" (", in.where(rec), ") answers line ", rec.line,
         ", but ", jobs_path, " has no job on that line; were these results made from it?");
  };
  while (std::getline(jobs, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (line == 1 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // as JobReader
    if (text.find_first_not_of(" \t\r\f\v") == std::string::npos) continue;
    ++n_jobs;
    for (; r < recs.size() && recs[r].line < line; ++r) stray(recs[r]);
    size_t begin = r;
    for (; r < recs.size() && recs[r].line == line; ++r) {
    }
    int64_t samples = 1;
    job_id_and_samples(parser, text, line, id, samples);
    if (begin == r) {
      ++counts.missing_jobs;
      note_missing(counts, line, id, {});
      continue;
    }
    const uint64_t h = in.hash(id);
    const uint64_t line_hash = fnv1a64(text);
    for (size_t i = begin; i < r; ++i) {
      if (recs[i].id_hash != h) {
        fail("record for line ", line, " (", in.where(recs[i]), ") has id \"", in.id(recs[i]),
             "\" but ", jobs_path, " line ", line, " has id \"", id,
             "\"; were these results made from this jobs file?");
      }
      if (recs[i].line_hash != 0 && recs[i].line_hash != line_hash) {
        fail("record for line ", line, " (", in.where(recs[i]), ", id \"", id,
             "\") was made from another text of that line than ", jobs_path, " has (line_hash ",
             hex64(recs[i].line_hash), ", the jobs file's is ", hex64(line_hash),
             "); were these results made from this jobs file?");
      }
    }
    if (recs[begin].sample < 0) continue;  // an error record answers the whole job
    // Samples of one line are distinct here (check_duplicates), so those below `samples`
    // that are present leave exactly the missing ones.
    bool stray_sample = recs[r - 1].sample >= samples;
    if (!stray_sample && int64_t(r - begin) == samples) continue;
    if (allow_partial && !stray_sample) {
      std::vector<int64_t> missing;
      for (int64_t s = 0, i = int64_t(begin); s < samples; ++s) {
        if (i < int64_t(r) && recs[size_t(i)].sample == s) {
          ++i;
        } else {
          missing.push_back(s);
        }
      }
      ++counts.incomplete_jobs;
      note_missing(counts, line, id, std::move(missing));
      continue;
    }
    std::string found;
    for (size_t i = begin; i < r; ++i) found += cat(i > begin ? ", " : "", recs[i].sample);
    fail("missing results for job id \"", id, "\" (line ", line, "): expected samples 0..",
         samples - 1, ", found ", found);
  }
  if (r < recs.size()) stray(recs[r]);
  if (counts.missing_jobs > 0 && !allow_partial) {
    const MissingJob& m = counts.first_missing.front();
    fail("missing results for job id \"", m.id, "\" (line ", m.line, ")",
         counts.missing_jobs > 1 ? cat(" and ", counts.missing_jobs - 1, " more jobs")
                                 : std::string(),
         "; run the missing shards (or `loom run --resume` them) and merge again");
  }
  return n_jobs;
}

// The inputs' side files, where they have one: made by one model with the same options but
// the shard, and finished.
void check_side_files(const std::vector<std::string>& inputs, bool allow_partial,
                      MergeCounts& counts) {
  nlohmann::json first_side;
  size_t first_input = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const nlohmann::json side = read_sidecar(sidecar_path(inputs[i]));
    if (side.is_null()) continue;
    if (first_side.is_null()) {
      first_side = side;
      first_input = i;
    }
    const nlohmann::json& id = side["identity"];
    const nlohmann::json& first = first_side["identity"];
    nlohmann::json keys = first;
    keys.update(id);
    keys.erase("shard");
    keys["kv_dtype"] = nullptr;  // recorded or not: the provenance says it (identity_text)
    for (auto it = keys.begin(); it != keys.end(); ++it) {
      const std::string& key = it.key();
      const auto value = [&](const nlohmann::json& s) {
        const std::string text = identity_text(s, s["identity"], key);
        return text.empty() ? std::string("(absent)") : text;
      };
      LOOM_CHECK(identity_agrees(side, first_side, key), "merge: ", inputs[i], " was made with ",
                 key, " = ", value(side), ", ", inputs[first_input], " with ", value(first_side),
                 " (their side files); expected the shards of one run");
    }
    const std::string why = shards_differ(side, first_side);  // their jobs_read
    LOOM_CHECK(why.empty(), "merge: ", inputs[i], " and ", inputs[first_input],
               " are not shards of one run (their side files): ", why);
    const std::string state = side.value("state", "(none)");
    if (state == "complete") continue;
    LOOM_CHECK(allow_partial, "merge: ", inputs[i], " is not finished (", sidecar_path(inputs[i]),
               " says \"", state,
               "\"); finish it with `loom run --resume`, or pass --allow-partial");
    if (counts.unfinished_files++ == 0) counts.first_unfinished = cat(inputs[i], ": ", state);
  }
}

}  // namespace

MergeCounts merge_results(const std::vector<std::string>& inputs, const std::string& jobs_path,
                          const std::string& out_path, const MergeOptions& options) {
  const bool allow_partial = options.allow_partial;
  const IdHash hash = options.id_hash ? options.id_hash : job_id_hash;
  LOOM_CHECK(!inputs.empty(), "merge: expected at least one results file, found none");
  for (const std::string& in : inputs) {
    LOOM_CHECK(!same_path(in, out_path), "merge: --out ", out_path, " is also an input (", in,
               "); write the merged file somewhere else");
    LOOM_CHECK(!same_path(sidecar_path(in), out_path), "merge: --out ", out_path,
               " is the side file of the input ", in, "; write the merged file somewhere else");
  }
  LOOM_CHECK(jobs_path.empty() || !same_path(jobs_path, out_path), "merge: --out ", out_path,
             " is the jobs file (--jobs ", jobs_path, "); write the merged file somewhere else");
  MergeCounts counts;
  check_shard_set(inputs, allow_partial, counts);
  check_side_files(inputs, allow_partial, counts);
  simdjson::dom::parser parser;
  std::vector<Rec> recs;
  for (uint32_t f = 0; f < inputs.size(); ++f) index_file(inputs, f, hash, recs, parser);
  counts.files = int64_t(inputs.size());
  Inputs in(inputs, hash);
  check_duplicates(in, recs);
  std::sort(recs.begin(), recs.end(), [](const Rec& a, const Rec& b) {
    return std::tie(a.line, a.sample, a.file, a.offset) <
           std::tie(b.line, b.sample, b.file, b.offset);
  });
  if (!jobs_path.empty())
    counts.jobs = check_against_jobs(in, recs, jobs_path, allow_partial, parser, counts);

  // Copy the records, in order, into a file renamed over out_path when complete.
  bool to_stdout = out_path == "-";
  std::string tmp = to_stdout ? "" : out_path + ".merging";
  std::FILE* out = to_stdout ? stdout : std::fopen(tmp.c_str(), "w");
  LOOM_CHECK(out, "cannot write merged results to ", out_path, ": ", std::strerror(errno),
             "; check the directory exists and is writable");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(to_stdout ? nullptr : out, std::fclose);
  for (const Rec& r : recs) {
    const std::string& bytes = in.bytes(r);
    if (std::fwrite(bytes.data(), 1, bytes.size(), out) != bytes.size() ||
        std::fputc('\n', out) == EOF) {
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

std::string merge_missing_summary(const MergeCounts& c) {
  std::string s;
  auto sep = [&] { return s.empty() ? "" : "; "; };
  if (c.unfinished_files > 0)
    s += cat(c.unfinished_files, c.unfinished_files == 1 ? " input" : " inputs", " not finished (",
             c.first_unfinished, c.unfinished_files > 1 ? ", ..." : "", ")");
  if (c.missing_shard_count > 0) {
    std::string list;
    for (size_t i = 0; i < c.missing_shards.size() && i < 10; ++i)
      list += cat(i ? ", " : "", c.missing_shards[i]);
    if (c.missing_shard_count > 10) list += cat(" and ", c.missing_shard_count - 10, " more");
    s += cat("missing ", c.missing_shard_count == 1 ? "shard " : "shards ", list, " of ",
             c.shard_count);
  }
  if (c.missing_jobs > 0)
    s += cat(sep(), c.missing_jobs, c.missing_jobs == 1 ? " job" : " jobs", " without records");
  if (c.incomplete_jobs > 0)
    s += cat(sep(), c.incomplete_jobs, c.incomplete_jobs == 1 ? " job" : " jobs",
             " missing samples");
  if (!c.first_missing.empty()) {
    s += " (";
    for (size_t i = 0; i < c.first_missing.size(); ++i) {
      const MissingJob& m = c.first_missing[i];
      s += cat(i ? ", " : "", "job id \"", m.id, "\" (line ", m.line, ")");
      if (!m.samples.empty()) {
        s += " samples ";
        for (size_t k = 0; k < m.samples.size() && k < 10; ++k)
          s += cat(k ? "," : "", m.samples[k]);
        if (m.samples.size() > 10) s += ",...";
      }
    }
    if (int64_t(c.first_missing.size()) < c.missing_jobs + c.incomplete_jobs) s += ", ...";
    s += ")";
  }
  return s;
}

}  // namespace loom
