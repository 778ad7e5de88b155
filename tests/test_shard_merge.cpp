// Merging (lib/io/merge.h): 3 shards of a run merged into exactly the bytes of the unsharded
// run, plus every refusal of merge with its message. The shard rules are in test_shard.cpp.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/jobs.h"
#include "io/merge.h"
#include "io/results.h"
#include "io/shard.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("loom_test_merge_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void put(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

ModelSpec plain_spec() {
  ModelSpec s;
  s.vocab = 1000;
  s.max_positions = 64;
  return s;
}

// A jobs file of plain jobs with blank lines, a bad line and num_samples 1..3.
std::string jobs_text() {
  std::string t;
  for (int i = 0; i < 14; ++i) {
    if (i == 4) t += "\n";                             // blank: counts as a line, not a job
    if (i == 9) t += "{\"id\":\"bad\",\"oops\":1}\n";  // error record
    t += "{\"id\":\"j" + std::to_string(i) + "\",\"prompt_token_ids\":[" + std::to_string(i) +
         "],\"max_tokens\":2,\"num_samples\":" + std::to_string(1 + i % 3) + "}\n";
  }
  return t;
}

// The records a run of shard `shard` writes, in a shuffled completion order (as continuous
// batching finishes jobs out of order).
std::vector<JobResult> run_shard(const fs::path& jobs, int index, int count, unsigned seed) {
  JobReader reader(jobs.string(), plain_spec(), JobDefaults{});
  reader.set_shard(index, count);
  std::vector<JobResult> out;
  Job job;
  JobError error;
  bool ok = false;
  while (reader.next(job, error, ok)) {
    if (!ok) {
      JobResult r;
      r.ok = false;
      r.id = error.id;
      r.id_is_number = error.id_is_number;
      r.line = error.line;
      r.error = error.message;
      out.push_back(r);
      continue;
    }
    for (int s = 0; s < job.num_samples; ++s) {
      JobResult r;
      r.id = job.id;
      r.id_is_number = job.id_is_number;
      r.line = job.line;
      r.sample = uint32_t(s);
      r.tokens = {job.prompt[0] * 10 + s, 7};
      r.finish_reason = "length";
      out.push_back(r);
    }
  }
  std::shuffle(out.begin(), out.end(), std::mt19937(seed));
  return out;
}

void write_results(const fs::path& p, const std::vector<JobResult>& rs) {
  ResultWriter w(p.string(), false);
  for (const JobResult& r : rs) w.write(r);
}

// merge_results' loom::Error message, or "(merged)".
std::string merge_error(const std::vector<std::string>& in, const std::string& jobs,
                        const std::string& out, const MergeOptions& opt = {}) {
  try {
    merge_results(in, jobs, out, opt);
  } catch (const loom::Error& e) {
    return e.what();
  }
  return "(merged)";
}

uint64_t same_hash(std::string_view) {
  return 7;  // every id collides with every other
}

// The result files of a run of `jobs` in `count` shards, named as `loom run` names them.
std::vector<std::string> write_shards(const fs::path& dir, const fs::path& jobs, int count) {
  std::vector<std::string> paths;
  for (int k = 0; k < count; ++k) {
    std::string p = shard_path((dir / "out.jsonl").string(), Shard{k, count, "--shard"});
    write_results(p, run_shard(jobs, k, count, 40 + unsigned(k)));
    paths.push_back(p);
  }
  return paths;
}

}  // namespace

TEST_SUITE("shard_merge") {
  TEST_CASE("3 shards merged equal the unsharded run, byte for byte") {
    fs::path dir = temp_dir();
    fs::path jobs = dir / "jobs.jsonl";
    put(jobs, jobs_text());
    write_results(dir / "full.jsonl", run_shard(jobs, 0, 1, 11));
    std::vector<std::string> shards;
    size_t total = 0;
    for (int k = 0; k < 3; ++k) {
      fs::path p = shard_path((dir / "out.jsonl").string(), Shard{k, 3, "--shard"});
      auto rs = run_shard(jobs, k, 3, 100 + unsigned(k));
      total += rs.size();
      write_results(p, rs);
      shards.push_back(p.string());
    }
    MergeCounts full = merge_results({(dir / "full.jsonl").string()}, jobs.string(),
                                     (dir / "full.merged.jsonl").string());
    MergeCounts merged =
        merge_results(shards, jobs.string(), (dir / "shards.merged.jsonl").string());
    CHECK(merged.files == 3);
    CHECK(merged.jobs == 15);
    CHECK(merged.errors == 1);
    CHECK(merged.ok == 27);  // num_samples 1,2,3,1,2,3,... over j0..j13: 5*1 + 5*2 + 4*3
    CHECK(merged.records == int64_t(total));
    CHECK(full.records == merged.records);
    std::string a = slurp(dir / "full.merged.jsonl"), b = slurp(dir / "shards.merged.jsonl");
    CHECK(a == b);
    // In input order: line, then sample.
    std::istringstream lines(b);
    std::string first, second;
    std::getline(lines, first);
    std::getline(lines, second);
    CHECK(first.rfind(R"({"id":"j0","sample":0,"status":"ok","line":1,)", 0) == 0);
    CHECK(second.rfind(R"({"id":"j1","sample":0,"status":"ok","line":2,)", 0) == 0);
    CHECK(b.find(R"({"id":"bad","status":"error","line":11,)") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "shards.merged.jsonl.merging"));
    fs::remove_all(dir);
  }

  TEST_CASE("merge refuses duplicates, gaps, strays, torn lines and merging into an input") {
    fs::path dir = temp_dir();
    fs::path jobs = dir / "jobs.jsonl";
    put(jobs, jobs_text());
    std::vector<std::string> shards;
    for (int k = 0; k < 3; ++k) {
      fs::path p = dir / ("s" + std::to_string(k) + ".jsonl");
      write_results(p, run_shard(jobs, k, 3, 7));
      shards.push_back(p.string());
    }
    std::string out = (dir / "m.jsonl").string();
    auto msg = [&](const std::vector<std::string>& in, const std::string& j) {
      try {
        merge_results(in, j, out);
      } catch (const loom::Error& e) {
        return std::string(e.what());
      }
      return std::string("(merged)");
    };
    // A shard left out.
    CHECK(msg({shards[0], shards[2]}, jobs.string()) ==
          "missing results for job id \"j1\" (line 2) and 4 more jobs; run the missing shards "
          "(or `loom run --resume` them) and merge again");
    CHECK(msg({shards[0], shards[2]}, "") == "(merged)");  // no jobs file: no completeness check
    // A shard given twice.
    std::string dup = msg({shards[0], shards[1], shards[0]}, "");
    CAPTURE(dup);
    CHECK(dup == "duplicate record for job id \"bad\" (error) in " + shards[0] + " line 1 and " +
                     shards[0] + " line 1; job ids must be unique and each shard merged once");
    // A sample missing (j2 has 3 samples; drop its sample 1).
    fs::path holey = dir / "holey.jsonl";
    {
      std::ifstream in(shards[2]);
      std::ofstream o(holey);
      for (std::string s; std::getline(in, s);)
        if (s.find(R"("id":"j2","sample":1,)") == std::string::npos) o << s << "\n";
    }
    CHECK(msg({shards[0], shards[1], holey.string()}, jobs.string()) ==
          "missing results for job id \"j2\" (line 3): expected samples 0..2, found 0, 2");
    // Records from another jobs file.
    fs::path other = dir / "other_jobs.jsonl";
    put(other, "{\"id\":\"zzz\"}\n");
    CHECK(msg({shards[0]}, other.string()).find("record for line 1 (" + shards[0] + " line ") == 0);
    // A torn shard.
    fs::path torn = dir / "torn.jsonl";
    std::string whole = slurp(shards[1]);
    put(torn, whole + "{\"id\":\"j9\",\"sam");
    int64_t torn_line = std::count(whole.begin(), whole.end(), '\n') + 1;
    CHECK(msg({shards[0], torn.string(), shards[2]}, "") ==
          "results file " + torn.string() + " line " + std::to_string(torn_line) +
              ": torn line (no newline at its end); if that shard's run was killed, finish it "
              "with `loom run --resume` first");
    // --out is an input.
    CHECK_THROWS_WITH_AS(merge_results({shards[0]}, "", shards[0]),
                         ("merge: --out " + shards[0] + " is also an input (" + shards[0] +
                          "); write the merged file somewhere else")
                             .c_str(),
                         loom::Error);
    CHECK_FALSE(fs::exists(out + ".merging"));
    fs::remove_all(dir);
  }
  TEST_CASE("merge: integer ids stay integers; 8 and \"8\" are one id") {
    fs::path dir = temp_dir();
    fs::path jobs = dir / "jobs.jsonl";
    auto job = [](const std::string& id) {
      return "{\"id\":" + id + ",\"prompt_token_ids\":[1],\"max_tokens\":2}\n";
    };
    put(jobs, job("8") + job("\"x\"") + job("18446744073709551615") + job("-3"));
    std::vector<std::string> shards = write_shards(dir, jobs, 2);
    std::string out = (dir / "m.jsonl").string();
    MergeCounts c = merge_results(shards, jobs.string(), out);
    CHECK(c.ok == 4);
    std::string merged = slurp(out);
    CHECK(merged.rfind(R"({"id":8,"sample":0,"status":"ok","line":1,)", 0) == 0);
    CHECK(merged.find(R"({"id":18446744073709551615,"sample":0,"status":"ok","line":3,)") !=
          std::string::npos);
    CHECK(merged.find(R"({"id":-3,"sample":0,"status":"ok","line":4,)") != std::string::npos);
    // The jobs file may write the id as a string: the same id.
    put(jobs, job("\"8\"") + job("\"x\"") + job("\"18446744073709551615\"") + job("-3"));
    CHECK(merge_error(shards, jobs.string(), out) == "(merged)");
    put(jobs, job("9") + job("\"x\"") + job("1") + job("-3"));
    std::string msg = merge_error(shards, jobs.string(), out);
    CAPTURE(msg);
    CHECK(msg.rfind("record for line 1 (" + shards[0] + " line ", 0) == 0);
    CHECK(msg.find(") has id \"8\" but " + jobs.string() +
                   " line 1 has id \"9\"; were these results made from this jobs file?") !=
          std::string::npos);
    fs::remove_all(dir);
  }

  TEST_CASE("merge: a duplicate refused by its shard merges; one id on two shards does not") {
    fs::path dir = temp_dir();
    fs::path jobs = dir / "jobs.jsonl";
    const std::string good = R"("prompt_token_ids":[1],"max_tokens":2})";
    put(jobs,
        "{\"id\":\"dup\"," + good + "\n{\"id\":\"x\"," + good + "\n{\"id\":\"dup\"," + good + "\n");
    std::string out = (dir / "m.jsonl").string();
    // Unsharded, and in 2 shards (lines 1 and 3 in shard 0): line 3 is an error record with
    // the id "dup" beside line 1's ok record.
    write_results(dir / "full.jsonl", run_shard(jobs, 0, 1, 3));
    MergeCounts full = merge_results({(dir / "full.jsonl").string()}, jobs.string(), out);
    CHECK(full.ok == 2);
    CHECK(full.errors == 1);
    CHECK(slurp(out).find(R"({"id":"dup","status":"error","line":3,"error":"line 3: field)") !=
          std::string::npos);
    std::vector<std::string> two = write_shards(dir, jobs, 2);
    CHECK(merge_error(two, jobs.string(), out) == "(merged)");
    // In 3 shards no shard sees both lines: both are ok, and merge finds the duplicate.
    std::vector<std::string> three = write_shards(dir, jobs, 3);
    CHECK(merge_error(three, jobs.string(), out) ==
          "duplicate record for job id \"dup\" sample 0 in " + three[0] + " line 1 and " +
              three[2] + " line 1; job ids must be unique and each shard merged once");
    // An error record before ok records of its id (line 1 bad, line 3 in another shard).
    put(jobs,
        "{\"id\":\"dup\",\"oops\":1}\n{\"id\":\"x\"," + good + "\n{\"id\":\"dup\"," + good + "\n");
    three = write_shards(dir, jobs, 3);
    CHECK(merge_error(three, jobs.string(), out) ==
          "job id \"dup\" has both an error record (" + three[0] + " line 1) and ok records (" +
              three[2] + " line 1); job ids must be unique");
    fs::remove_all(dir);
  }

  TEST_CASE("merge: 3 of 4 shards fail naming shard 3; allow_partial writes them and says so") {
    fs::path dir = temp_dir();
    fs::path jobs = dir / "jobs.jsonl";
    put(jobs, jobs_text());
    std::vector<std::string> four = write_shards(dir, jobs, 4);
    std::vector<std::string> three(four.begin(), four.begin() + 3);
    std::string out = (dir / "m.jsonl").string();
    CHECK(merge_error(three, "", out) ==
          "merge: shard 3 of 4 is missing; merge every shard of the run, or pass "
          "--allow-partial to merge what there is");
    CHECK(merge_error({four[0], four[2]}, "", out) ==
          "merge: shards 1, 3 of 4 are missing; merge every shard of the run, or pass "
          "--allow-partial to merge what there is");
    CHECK_FALSE(fs::exists(out));
    MergeOptions partial;
    partial.allow_partial = true;
    MergeCounts c = merge_results(three, "", out, partial);
    CHECK(c.shard_count == 4);
    CHECK(c.missing_shard_count == 1);
    CHECK(c.missing_shards == std::vector<int>{3});
    CHECK(c.missing_jobs == 0);  // no jobs file: job lines are not checked
    CHECK_FALSE(c.complete());
    int64_t expected = 0;
    for (const std::string& p : three) {
      std::string t = slurp(p);
      expected += std::count(t.begin(), t.end(), '\n');
    }
    CHECK(c.records == expected);
    CHECK(merge_missing_summary(c) == "missing shard 3 of 4");
    // With the jobs file: shard 3's jobs (non-blank lines j = 3, 7, 11: lines 4, 9, 13, after
    // the blank line 5 and the bad line 11) are reported missing.
    c = merge_results(three, jobs.string(), out, partial);
    CHECK(c.missing_jobs == 3);
    CHECK(c.records == expected);
    REQUIRE(c.first_missing.size() == 3);
    CHECK(c.first_missing[0].line == 4);
    CHECK(c.first_missing[0].id == "j3");
    CHECK(c.first_missing[0].samples.empty());
    CHECK(merge_missing_summary(c) ==
          "missing shard 3 of 4; 3 jobs without records (job id \"j3\" (line 4), job id \"j7\" "
          "(line 9), job id \"j10\" (line 13))");
    // A missing sample is reported too (j2, line 3: samples 0..2, drop 1).
    fs::path holey = dir / "holey.shard-2-of-4.jsonl";
    {
      std::ifstream in(four[2]);
      std::ofstream o(holey);
      for (std::string s; std::getline(in, s);)
        if (s.find(R"("id":"j2","sample":1,)") == std::string::npos) o << s << "\n";
    }
    c = merge_results({four[0], four[1], holey.string(), four[3]}, jobs.string(), out, partial);
    CHECK(c.complete() == false);
    CHECK(c.missing_shard_count == 0);
    CHECK(c.incomplete_jobs == 1);
    CHECK(merge_missing_summary(c) == "1 job missing samples (job id \"j2\" (line 3) samples 1)");
    CHECK(merge_error({four[0], four[1], holey.string(), four[3]}, jobs.string(), out) ==
          "missing results for job id \"j2\" (line 3): expected samples 0..2, found 0, 2");
    // Whole sets are merged as before, complete.
    c = merge_results(four, jobs.string(), out, partial);
    CHECK(c.complete());
    CHECK(merge_missing_summary(c) == "");
    // Not missing but wrong: a mix of N, a shard twice, a duplicate — even with allow_partial.
    fs::path other = dir / "x.shard-0-of-3.jsonl";
    fs::copy_file(four[0], other);
    CHECK(merge_error({four[0], other.string()}, "", out, partial) ==
          "merge: " + four[0] + " is a shard of 4 but " + other.string() +
              " is a shard of 3; merge the shards of one run");
    fs::create_directories(dir / "again");
    fs::path again = dir / "again" / fs::path(four[1]).filename();
    fs::copy_file(four[1], again);
    CHECK(merge_error({four[0], four[1], again.string()}, "", out, partial) ==
          "merge: shard 1 of 4 is given twice (" + four[1] + " and " + again.string() +
              "); merge each shard once");
    fs::path renamed = dir / "renamed.jsonl";
    fs::copy_file(four[0], renamed);
    CHECK(merge_error({four[0], renamed.string()}, "", out, partial)
              .rfind("duplicate record for job id ", 0) == 0);
    fs::remove_all(dir);
  }

  TEST_CASE("merge: with every id hash colliding, the same bytes and the same duplicates") {
    fs::path dir = temp_dir();
    fs::path jobs = dir / "jobs.jsonl";
    put(jobs, jobs_text());
    write_results(dir / "full.jsonl", run_shard(jobs, 0, 1, 5));
    std::vector<std::string> shards = write_shards(dir, jobs, 3);
    MergeOptions collide;
    collide.id_hash = same_hash;
    merge_results({(dir / "full.jsonl").string()}, jobs.string(), (dir / "a.jsonl").string());
    MergeCounts c = merge_results(shards, jobs.string(), (dir / "b.jsonl").string(), collide);
    CHECK(c.ok == 27);
    CHECK(slurp(dir / "a.jsonl") == slurp(dir / "b.jsonl"));
    // A shard given twice (under another name): the first duplicate in input order, both places.
    fs::path copy = dir / "copy.jsonl";
    fs::copy_file(shards[1], copy);
    std::string first;
    std::getline(std::ifstream(shards[1]) >> std::ws, first);
    auto j = nlohmann::json::parse(first);
    std::string what = j["status"] == "ok" ? " sample " + std::to_string(j["sample"].get<int>())
                                           : std::string(" (error)");
    const std::string expected = "duplicate record for job id \"" + j["id"].get<std::string>() +
                                 "\"" + what + " in " + shards[1] + " line 1 and " + copy.string() +
                                 " line 1; job ids must be unique and each shard merged once";
    std::vector<std::string> twice = {shards[0], shards[1], shards[2], copy.string()};
    CHECK(merge_error(twice, "", (dir / "c.jsonl").string(), collide) == expected);
    CHECK(merge_error(twice, "", (dir / "c.jsonl").string()) == expected);
    fs::remove_all(dir);
  }
}
