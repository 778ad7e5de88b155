// The action slots of a frame job (jobs.h): action rows of numbers for models that project
// them ("actions"), or vocabulary ids for models whose frames carry their actions as tokens
// ("action_token_ids", and the ids in place in "prompt_token_ids"). Messages follow
// jobs.cpp's form: field, row / column or index, what was expected, what was found.
#include <cmath>

#include "io/job_parse.h"

namespace loom::job_parse {
namespace {

// What an action id must be, for messages: "an action token id in [0, 512) outside the image
// ids [0, 480)" when the table sets an image-id range, else "... in [0, 512)".
std::string expected_action_id(const ModelSpec& spec) {
  std::string s = cat("an action token id in [0, ", spec.vocab, ")");
  if (spec.logit_end > 0)
    s += cat(" outside the image ids [", spec.sample_begin(), ", ", spec.sample_end(), ")");
  return s;
}

bool valid_action_id(int64_t v, const ModelSpec& spec) {
  const bool image = spec.logit_end > 0 && v >= spec.sample_begin() && v < spec.sample_end();
  return v >= 0 && v < spec.vocab && !image;
}

}  // namespace

void check_prompt_action_slot(int64_t v, size_t index, size_t frame, size_t slot,
                              const ModelSpec& spec, const JobDefaults& d) {
  const std::string where =
      cat(field("prompt_token_ids"), " index ", index, " (frame ", frame, ", action slot ", slot);
  if (spec.action_projection != ActionProjection::Tokens) {
    if (v != d.placeholder_id)
      bad(where, "): expected the placeholder ", d.placeholder_id, ", found ", v);
    return;
  }
  if (!valid_action_id(v, spec)) {
    bad(where, "): expected ", expected_action_id(spec), ", found ", v,
        v == d.placeholder_id
            ? " (the action placeholder; this model's context frames hold their action ids)"
            : "");
  }
}

void parse_actions(bool has, element value, const ModelSpec& spec, Job& job) {
  const int A = spec.action_tokens, dim = spec.action_dim;
  const int64_t all = int64_t(A) * (job.context_frames + job.num_frames);
  const int64_t no_last = all - A;
  auto expected_rows = [&] {
    return cat(all, " or ", no_last, " rows of ", dim, " numbers (", A, " action slots x (",
               job.context_frames, " context + ", job.num_frames,
               " generated frames); the last frame's actions are optional)");
  };
  if (!has) {
    if (all == 0) return;
    bad("missing field \"actions\": expected ", expected_rows(), ", found no such field");
  }
  if (value.type() != element_type::ARRAY) {
    bad(field("actions"), ": expected ", expected_rows(), ", found ", describe(value));
  }
  array rows = value;
  int64_t n_rows = 0;
  for (element row : rows) {
    (void)row;
    ++n_rows;
  }
  if (n_rows != all && n_rows != no_last) {
    bad(field("actions"), ": expected ", expected_rows(), ", found ", n_rows, " rows");
  }
  job.actions.clear();
  job.actions.reserve(size_t(n_rows) * size_t(dim));
  int64_t r = 0;
  for (element row : rows) {
    if (row.type() != element_type::ARRAY) {
      bad(field("actions"), " row ", r, ": expected a list of ", dim, " numbers, found ",
          describe(row));
    }
    int c = 0;
    for (element x : array(row)) {
      if (c == dim) break;
      if (!is_number(x)) {
        bad(field("actions"), " row ", r, " column ", c,
            ": expected a finite number (JSON has no NaN or Infinity), found ", describe(x));
      }
      double v = get_double(x);
      if (!(std::fabs(v) <= double(kFloatMax))) {
        bad(field("actions"), " row ", r, " column ", c,
            ": expected a finite number within float range (|x| <= 3.4e38), found ",
            format_double(v));
      }
      job.actions.push_back(float(v));
      ++c;
    }
    size_t n = array(row).size();
    if (n != size_t(dim)) {
      bad(field("actions"), " row ", r, ": expected ", dim, " numbers, found ", n);
    }
    ++r;
  }
  job.action_rows = int(n_rows);
}

void parse_action_token_ids(bool has, element value, const ModelSpec& spec, Job& job) {
  const int A = spec.action_tokens, n = job.num_frames;
  const char* name = "action_token_ids";
  auto expected_rows = [&] {
    return cat(n, " or ", n - 1, " rows of ", A, " action token ids (one row after each of the ", n,
               " generated frames; the last frame's row is optional)");
  };
  job.action_ids.clear();
  job.action_id_rows = 0;
  if (!has) {
    if (n == 1) return;
    bad("missing field \"", name, "\": expected ", expected_rows(), ", found no such field");
  }
  if (value.type() != element_type::ARRAY) {
    bad(field(name), ": expected ", expected_rows(), ", found ", describe(value));
  }
  const size_t rows = array(value).size();
  if (rows != size_t(n) && rows != size_t(n - 1)) {
    bad(field(name), ": expected ", expected_rows(), ", found ", rows, " rows");
  }
  job.action_ids.reserve(rows * size_t(A));
  size_t r = 0;
  for (element row : array(value)) {
    if (row.type() != element_type::ARRAY) {
      bad(field(name), " row ", r, ": expected a list of ", A, " action token ids, found ",
          describe(row));
    }
    const size_t got = array(row).size();
    if (got != size_t(A)) bad(field(name), " row ", r, ": expected ", A, " ids, found ", got);
    size_t c = 0;
    for (element x : array(row)) {
      if (x.type() != element_type::INT64 || !valid_action_id(int64_t(x), spec)) {
        bad(field(name), " row ", r, " column ", c, ": expected ", expected_action_id(spec),
            ", found ", describe(x));
      }
      job.action_ids.push_back(int32_t(int64_t(x)));
      ++c;
    }
    ++r;
  }
  job.action_id_rows = int(rows);
}

}  // namespace loom::job_parse
