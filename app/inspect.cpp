// `loom inspect --model DIR [--json]`: describe_model's account of a checkpoint, then the job
// line the model takes: each field's rule with this model's numbers and an example line. The
// example is checked by the jobs reader itself before it is printed, so it is always a job that
// `loom run` accepts; it is the last line of the text output (`| tail -n1 > jobs.jsonl`).
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/error.h"
#include "io/jobs.h"
#include "model/inspect.h"
#include "model/mapping.h"

namespace loom {
namespace {

using nlohmann::ordered_json;
using Rules = std::vector<std::pair<std::string, std::string>>;  // field → its rule

const char* kSamplingRule =
    "sampling {temperature, top_k, top_p, seed}: run's --temperature, --top-k, --top-p and "
    "--seed fill what it leaves out";

// A frame model's line: whole context frames of image ids and action slots, action rows for
// every frame, and the frames to generate.
Rules frame_rules(const ModelSpec& s, const JobDefaults& d) {
  const int P = s.image_tokens, A = s.action_tokens, S = s.frame_slots(), T = s.temporal_rows;
  const bool tokens = s.action_projection == ActionProjection::Tokens;
  const std::string image_ids = cat("[", s.sample_begin(), ", ", s.sample_end(), ")");
  // Action-token models: actions are vocabulary ids in the frame, outside the image ids when
  // the table sets their range (README "Jobs": action-token models).
  const std::string action_ids =
      cat("action ids in [0, ", s.vocab, ")", s.logit_end > 0 ? " outside " + image_ids : "");
  Rules r;
  r.push_back({"prompt_token_ids",
               cat("n_ctx whole context frames (1 <= n_ctx", T > 0 ? cat(" <= ", T) : "", "), ", S,
                   "·n_ctx ids: per frame ", P, " image ids in ", image_ids,
                   A == 0   ? ""
                   : tokens ? cat(", then ", A, " ", action_ids)
                            : cat(", then ", A, " action slots written ", d.placeholder_id,
                                  " (--placeholder-id)"))});
  if (tokens)
    r.push_back({"action_token_ids", cat("one row of ", A,
                                         " action ids after each generated frame (num_frames "
                                         "rows; the last may be left out), each as above")});
  else if (A > 0)
    r.push_back({"actions", cat(A, "·(n_ctx + num_frames) rows of ", s.action_dim, " numbers: ", A,
                                " per context and generated frame (the last "
                                "frame's ",
                                A, " may be left out)")});
  else
    r.push_back({"actions", "none: the model has no action slots"});
  r.push_back({"num_frames", cat("frames to generate, 1 to ", kMaxJobFrames)});
  std::string optional = cat("id (string or integer), ", kSamplingRule, "; num_samples");
  if (T > 1)
    optional += cat("; overlap (frames a new round of ", T, " carries over, 1 to ", T - 1,
                    ", default ", std::min(d.overlap, T - 1), ")");
  r.push_back({"optional", optional});
  return r;
}

// A plain model's line: a prompt and how many tokens to add, within the position table.
Rules plain_rules(const ModelSpec& s) {
  const int N = s.max_positions;
  Rules r;
  r.push_back({"prompt_token_ids", cat("1", N > 0 ? cat(" to ", N - 1) : " or more",
                                       " token ids in [0, ", s.vocab, ")")});
  r.push_back({"max_tokens", N > 0 ? cat("tokens to generate, 1 to ", N,
                                         " - prompt length (max_position_embeddings ", N, ")")
                                   : "tokens to generate, 1 or more"});
  r.push_back({"optional", cat("id (string or integer), ignore_eos (true: go on past eos ",
                               eos_ids_text(s), "), ", kSamplingRule, "; num_samples")});
  return r;
}

// One context frame (image ids 0, 1, 2, ...) and two generated frames with zero actions; or a
// short plain prompt. No "sampling": run's --temperature, --top-k, --top-p and --seed apply.
ordered_json example_job(const ModelSpec& s, const JobDefaults& d) {
  ordered_json j = {{"id", "example-1"}};
  if (s.has_frames()) {
    constexpr int kFrames = 2;
    std::vector<int64_t> prompt;
    const bool token_actions = s.action_projection == ActionProjection::Tokens;
    // Image ids from the start of the sampled range; action ids (token models) from its end.
    const int image0 = s.sample_begin(), action0 = s.sample_end() < s.vocab ? s.sample_end() : 0;
    for (int i = 0; i < s.image_tokens; i++)
      prompt.push_back(image0 + i % (s.sample_end() - image0));
    for (int i = 0; i < s.action_tokens; i++)
      prompt.push_back(token_actions ? action0 + i % (s.vocab - action0) : d.placeholder_id);
    j["prompt_token_ids"] = prompt;
    if (token_actions) {
      j["action_token_ids"] = std::vector<std::vector<int64_t>>(
          kFrames, std::vector<int64_t>(prompt.end() - s.action_tokens, prompt.end()));
    } else if (s.action_tokens > 0)
      j["actions"] = std::vector<std::vector<double>>(
          size_t(s.action_tokens) * (1 + kFrames), std::vector<double>(size_t(s.action_dim), 0.0));
    j["num_frames"] = kFrames;
  } else {
    std::vector<int64_t> prompt;
    if (s.bos_id >= 0) prompt.push_back(s.bos_id);
    for (int i = 10; i < 13; i++) prompt.push_back(i % s.vocab);
    const int room = s.max_positions > 0 ? s.max_positions - int(prompt.size()) : 8;
    j["prompt_token_ids"] = prompt;
    j["max_tokens"] = std::max(1, std::min(8, room));
  }
  return j;
}

// "  field             rule ..." folded at word boundaries to fit 100 columns.
std::string rule_lines(const std::string& field, const std::string& rule) {
  constexpr size_t kIndent = 20, kWidth = 100;
  std::string out =
      "  " + field + std::string(kIndent - 2 - std::min(field.size(), kIndent - 3), ' ');
  size_t col = out.size();
  for (size_t i = 0; i < rule.size();) {
    size_t end = rule.find(' ', i);
    if (end == std::string::npos) end = rule.size();
    const std::string word = rule.substr(i, end - i);
    if (col > kIndent && col + 1 + word.size() > kWidth) {
      out += "\n" + std::string(kIndent, ' ');
      col = kIndent;
    } else if (col > kIndent) {
      out += ' ';
      col++;
    }
    out += word;
    col += word.size();
    i = end + 1;
  }
  return out + "\n";
}

}  // namespace

int inspect_command(const InspectArgs& a) {
  LoadOptions lo;
  lo.table_path = a.model_table;
  const LoadedModel m = load_model(a.model, lo);
  const ModelSpec& s = m.spec;
  const JobDefaults defaults;
  const Rules rules = s.has_frames() ? frame_rules(s, defaults) : plain_rules(s);
  const ordered_json example = example_job(s, defaults);
  const std::string example_line = example.dump();
  Job job;
  JobError error;
  LOOM_CHECK(
      parse_job_line(example_line, 1, s, defaults, job, error),
      "inspect: the example job line does not pass the jobs reader (a loom bug): ", error.message);

  if (a.json) {
    ordered_json out = describe_model_json(m);
    ordered_json t = {{"kind", s.has_frames() ? "frames" : "tokens"}};
    for (const auto& [field, rule] : rules) t["rules"][field] = rule;
    t["example"] = example;
    out["job_template"] = t;
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::fputs(describe_model(m).c_str(), stdout);
  std::printf("\njob line (loom run --jobs FILE: one JSON object per line)\n");
  for (const auto& [field, rule] : rules) std::fputs(rule_lines(field, rule).c_str(), stdout);
  std::printf("  example, the last line:\n%s\n", example_line.c_str());
  return kExitOk;
}

}  // namespace loom
