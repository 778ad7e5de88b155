// Golden files (testdata/*/golden.json, written by scripts/hf_reference.py from HF
// transformers): each case is one job with its expected token streams and, for some draws,
// the full last-slot logits. run_golden_case runs one case through the engine on a backend.
#pragma once

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>

#include "backend/backend.h"
#include "core/error.h"
#include "engine/engine.h"
#include "io/jobs.h"

namespace loom::test {

struct GoldenRun {
  std::map<uint32_t, std::vector<int32_t>> tokens;  // sample → all generated ids, flattened
  std::map<std::pair<uint32_t, uint64_t>, std::vector<float>> logits;  // (sample, draw) → [vocab]
};

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path);
  return nlohmann::json::parse(in);
}

inline GoldenRun run_golden_case(const nlohmann::json& c, const ModelSpec& spec, Backend& backend,
                                 int max_seqs = 8) {
  Job job;
  JobError err;
  if (!parse_job_line(c["job"].dump(), 1, spec, JobDefaults{}, job, err))
    throw Error("golden job does not parse: " + err.message);
  std::vector<uint64_t> wanted;
  if (c.contains("logits"))
    for (const auto& l : c["logits"]) wanted.push_back(l["draw_index"].get<uint64_t>());
  GoldenRun out;
  EngineOptions opt;
  opt.scheduler.max_seqs = max_seqs;
  opt.cache.block_size = backend.default_block_size();  // as `loom run` (cuda 64, cpu 16)
  opt.cache.num_blocks = 64;
  if (!wanted.empty())
    opt.on_logits = [&](const Sequence& s, const float* logits, int vocab) {
      for (uint64_t d : wanted)
        if (d == s.draw_index()) out.logits[{s.sample(), d}].assign(logits, logits + vocab);
    };
  Engine engine(spec, backend, opt);
  bool given = false;
  engine.run(
      [&](Job& j, JobError&, bool& ok) {
        if (given) return false;
        given = ok = true;
        j = job;
        return true;
      },
      [&](const JobResult& r) {
        if (!r.ok) throw Error("golden job failed: " + r.error);
        std::vector<int32_t>& t = out.tokens[r.sample];
        for (const auto& f : r.frames) t.insert(t.end(), f.begin(), f.end());
        t.insert(t.end(), r.tokens.begin(), r.tokens.end());
      });
  return out;
}

inline std::vector<int32_t> golden_tokens(const nlohmann::json& sample) {
  std::vector<int32_t> t;
  if (sample.contains("frames"))
    for (const auto& f : sample["frames"])
      for (const auto& v : f) t.push_back(v.get<int32_t>());
  if (sample.contains("tokens"))
    for (const auto& v : sample["tokens"]) t.push_back(v.get<int32_t>());
  return t;
}

// ‖a − b‖₂ / ‖b‖₂
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); i++) {
    const double d = double(a.at(i)) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Golden directories: $LOOM_GOLDEN_DIRS (':'-separated) or the bundled tiny models: Terra v1,
// V2 and plain Llama (scripts/hf_reference.py), OPT, GPT-2 and the Llama with action tokens
// (scripts/hf_families.py).
inline std::vector<std::string> golden_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LOOM_GOLDEN_DIRS")) {
    std::string s = env, cur;
    for (char ch : s + ":") {
      if (ch == ':') {
        if (!cur.empty()) dirs.push_back(cur);
        cur.clear();
      } else {
        cur += ch;
      }
    }
    return dirs;
  }
  for (const char* m :
       {"tiny_v1", "tiny_v2", "tiny_llama", "tiny_opt", "tiny_gpt2", "tiny_action_tokens"})
    dirs.push_back(std::string(LOOM_TESTDATA) + "/" + m);
  return dirs;
}

}  // namespace loom::test
