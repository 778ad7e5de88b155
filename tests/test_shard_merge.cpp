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
      r.line = error.line;
      r.error = error.message;
      out.push_back(r);
      continue;
    }
    for (int s = 0; s < job.num_samples; ++s) {
      JobResult r;
      r.id = job.id;
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
}
