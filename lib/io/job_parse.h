// Internals of the job-line parser shared by its three files: job_lines.cpp (the line reader
// and its diagnostics), jobs.cpp (the job schema) and job_actions.cpp (a frame's action slots:
// action rows, or action token ids). Only these files include it. A defect of a line is thrown
// as BadLine inside parse_job_line and turned into a JobError there; it never escapes lib/io.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/error.h"
#include "io/jobs.h"
#include "model/spec.h"

namespace loom::job_parse {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

constexpr size_t kShowChars = 40;  // how much of a bad value an error message quotes
constexpr float kFloatMax = std::numeric_limits<float>::max();

struct BadLine {
  std::string message;  // without the "line N: " prefix
};

template <class... Args>
[[noreturn]] void bad(Args&&... args) {
  throw BadLine{cat(std::forward<Args>(args)...)};
}

std::string quoted(std::string_view s);  // a JSON string literal, cut to kShowChars bytes
std::string format_double(double v);     // "3.0", not "3", for a double the job wrote
std::string describe(element e);         // the "found ..." half of a message
bool is_integer(element e);
bool is_number(element e);
double get_double(element e);
std::string field(const char* name);  // field "name"

// The job's id (job_ids.h: compared by its text), or the fallback "line-N" it starts as.
struct IdInfo {
  std::string text;
  bool is_number = false;  // a JSON integer
  bool given = false;      // the line gave it (false: "line-N")
};

// jobs.cpp. The schema: turns the parsed line `root` into `job` or throws BadLine. `id` is
// filled first, so the caller's error names the job's id whatever else is wrong.
void parse_job(const element& root, int64_t line, const ModelSpec& spec, const JobDefaults& d,
               Job& job, IdInfo& id);

// job_actions.cpp. Action slot `slot` of context frame `frame`, prompt index `index`, holds
// `v`: the placeholder for action-row models, an action token id for action-token models.
void check_prompt_action_slot(int64_t v, size_t index, size_t frame, size_t slot,
                              const ModelSpec& spec, const JobDefaults& d);
// "actions": A rows of action_dim numbers per context and generated frame (the last frame's
// rows optional). Needs job.context_frames and job.num_frames.
void parse_actions(bool has, element value, const ModelSpec& spec, Job& job);
// "action_token_ids": one row of A ids after each generated frame (the last row optional).
// Needs job.num_frames.
void parse_action_token_ids(bool has, element value, const ModelSpec& spec, Job& job);

}  // namespace loom::job_parse
