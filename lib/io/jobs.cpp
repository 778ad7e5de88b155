// The job schema (jobs.h): which fields a line may hold for the model at hand, their types and
// ranges, and the Job they become. Validation is strict and typed: every field is checked
// against the ModelSpec and every failure becomes one message of the form
//   <what>: expected <...>, found <...>
// which the line reader (job_lines.cpp) prefixes with "line N: ". Checks run in a fixed order
// (id, field names, prompt, frame counts, actions, overlap, flags, sampling, num_samples), so a
// line with several defects always reports the same first one. A frame's action slots are
// checked in job_actions.cpp.
#include "io/jobs.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string_view>

#include "core/error.h"
#include "io/job_ids.h"
#include "io/job_parse.h"

namespace loom {
namespace job_parse {

// `s` as a JSON string literal, cut to kShowChars bytes at a UTF-8 boundary.
std::string quoted(std::string_view s) {
  bool cut = s.size() > kShowChars;
  size_t n = cut ? kShowChars : s.size();
  while (cut && n > 0 && (uint8_t(s[n]) & 0xC0) == 0x80) --n;  // do not split a code point
  // Bytes that are not UTF-8 are shown as \xNN, so the message itself stays valid UTF-8.
  bool utf8 = simdjson::validate_utf8(s.data(), n);
  std::string out = "\"";
  for (size_t i = 0; i < n; ++i) {
    char c = s[i];
    static const char* hex = "0123456789abcdef";
    if (!utf8 && uint8_t(c) >= 0x80) {
      out += "\\x";
      out += hex[uint8_t(c) >> 4];
      out += hex[uint8_t(c) & 15];
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (uint8_t(c) < 0x20) {
      out += "\\u00";
      out += hex[uint8_t(c) >> 4];
      out += hex[uint8_t(c) & 15];
    } else {
      out += c;
    }
  }
  out += cut ? "...\"" : "\"";
  return out;
}

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  // A whole number written as "3" would hide that the job wrote 3.0 where an integer is due.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// What a JSON value is, for the "found ..." half of a message.
std::string describe(element e) {
  switch (e.type()) {
    case element_type::ARRAY: {
      size_t n = array(e).size();
      return n == 0 ? "an empty list" : cat("a list of ", n, n == 1 ? " item" : " items");
    }
    case element_type::OBJECT:
      return "an object";
    case element_type::INT64:
      return std::to_string(int64_t(e));
    case element_type::UINT64:
      return std::to_string(uint64_t(e));
    case element_type::DOUBLE:
      return format_double(double(e));
    case element_type::STRING:
      return quoted(std::string_view(e));
    case element_type::BOOL:
      return bool(e) ? "true" : "false";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "an unknown value";
}

bool is_integer(element e) {
  return e.type() == element_type::INT64 || e.type() == element_type::UINT64;
}
bool is_number(element e) {
  return is_integer(e) || e.type() == element_type::DOUBLE;
}

double get_double(element e) {
  switch (e.type()) {
    case element_type::INT64:
      return double(int64_t(e));
    case element_type::UINT64:
      return double(uint64_t(e));
    default:
      return double(e);
  }
}

std::string field(const char* name) {
  return cat("field \"", name, "\"");
}

}  // namespace job_parse

namespace {

using namespace job_parse;

// An integer in [lo, hi]; `what` names the field for the message.
int64_t get_int(element e, const std::string& what, int64_t lo, int64_t hi) {
  bool in_range = false;
  int64_t v = 0;
  if (e.type() == element_type::INT64) {
    v = int64_t(e);
    in_range = v >= lo && v <= hi;
  } else if (e.type() == element_type::UINT64) {
    in_range = false;  // above INT64_MAX, beyond every bound used here
  }
  if (!in_range) bad(what, ": expected an integer in [", lo, ", ", hi, "], found ", describe(e));
  return v;
}

// ---- Field table ---------------------------------------------------------------------------

constexpr const char* kFrameFields[] = {"id",      "prompt_token_ids", "actions",    "num_frames",
                                        "overlap", "sampling",         "num_samples"};
// Frame models whose actions are vocabulary ids (ActionProjection::Tokens).
constexpr const char* kTokenFrameFields[] = {"id",         "prompt_token_ids", "action_token_ids",
                                             "num_frames", "overlap",          "sampling",
                                             "num_samples"};
constexpr const char* kPlainFields[] = {"id",         "prompt_token_ids", "max_tokens",
                                        "ignore_eos", "sampling",         "num_samples"};
constexpr const char* kSamplingFields[] = {"temperature", "top_k", "top_p", "seed"};

template <size_t N>
bool known(const char* const (&names)[N], std::string_view key) {
  for (const char* n : names)
    if (key == n) return true;
  return false;
}

template <size_t N>
std::string one_of(const char* const (&names)[N]) {
  std::string s = "one of ";
  for (size_t i = 0; i < N; ++i) s += cat(i ? ", \"" : "\"", names[i], "\"");
  return s;
}

// The fields of a job line by name; a JSON null counts as absent (an optional field left out).
struct Fields {
  element id, prompt, actions, action_ids, num_frames, overlap, max_tokens, ignore_eos, sampling,
      num_samples;
  bool has_id = false, has_prompt = false, has_actions = false, has_action_ids = false,
       has_num_frames = false, has_overlap = false, has_max_tokens = false, has_ignore_eos = false,
       has_sampling = false, has_num_samples = false;
};

bool action_tokens(const ModelSpec& spec) {
  return spec.action_projection == ActionProjection::Tokens;
}

// What bounds a round, for messages: a learned temporal table ("<the> temporal table has T
// rows"), or (rotary or absolute positions) the frames per round that fit
// max_position_embeddings.
std::string round_size(const ModelSpec& spec, const char* the) {
  const int T = spec.temporal_rows;
  if (spec.positions == PositionKind::SpatioTemporal)
    return cat(the, "temporal table has ", T, T == 1 ? " row" : " rows");
  return cat("a round holds ", T, T == 1 ? " frame" : " frames");
}

void collect_fields(object obj, const ModelSpec& spec, Fields& f) {
  bool frames = spec.has_frames(), tokens = action_tokens(spec);
  struct Slot {
    const char* name;
    element* value;
    bool* present;
  } slots[] = {{"id", &f.id, &f.has_id},
               {"prompt_token_ids", &f.prompt, &f.has_prompt},
               {"actions", &f.actions, &f.has_actions},
               {"action_token_ids", &f.action_ids, &f.has_action_ids},
               {"num_frames", &f.num_frames, &f.has_num_frames},
               {"overlap", &f.overlap, &f.has_overlap},
               {"max_tokens", &f.max_tokens, &f.has_max_tokens},
               {"ignore_eos", &f.ignore_eos, &f.has_ignore_eos},
               {"sampling", &f.sampling, &f.has_sampling},
               {"num_samples", &f.num_samples, &f.has_num_samples}};
  std::vector<std::string_view> seen;
  for (auto kv : obj) {
    std::string_view key = kv.key;
    for (std::string_view s : seen)
      if (s == key)
        bad("field ", quoted(key), ": expected each field once, found it a second time");
    seen.push_back(key);
    // Models without action tokens read "action_token_ids" as unknown, as they always did.
    bool is_frame = tokens ? known(kTokenFrameFields, key) : known(kFrameFields, key);
    bool is_plain = known(kPlainFields, key);
    if (tokens && key == "actions") {
      bad("field \"actions\" holds action rows of numbers: expected \"action_token_ids\" for",
          " this model, whose actions are vocabulary ids, found \"actions\"");
    }
    if (!is_frame && !is_plain) {
      bad("unknown field ", quoted(key), ": expected ",
          tokens   ? one_of(kTokenFrameFields)
          : frames ? one_of(kFrameFields)
                   : one_of(kPlainFields),
          ", found ", quoted(key));
    }
    if (frames && !is_frame) {
      bad("field ", quoted(key), " is for plain (non-frame) models: expected \"num_frames\"",
          " for this frame model, found ", quoted(key));
    }
    if (!frames && !is_plain) {
      bad("field ", quoted(key), " is for frame models: expected \"max_tokens\" for this",
          " plain model, found ", quoted(key));
    }
    if (kv.value.type() == element_type::NULL_VALUE) continue;
    for (Slot& s : slots) {
      if (key == s.name) {
        *s.value = kv.value;
        *s.present = true;
      }
    }
  }
}

// ---- Field parsers -------------------------------------------------------------------------

void parse_id(const Fields& f, IdInfo& id) {
  if (!f.has_id) return;
  element e = f.id;
  std::string text;
  bool is_number = false;
  if (!id_text(e, text, is_number)) {
    bad(field("id"), ": expected a string or an integer, found ", describe(e));
  }
  if (text.empty()) bad(field("id"), ": expected a non-empty string or an integer, found \"\"");
  id = IdInfo{std::move(text), is_number, true};
}

std::vector<int64_t> read_ids(const Fields& f) {
  if (!f.has_prompt) {
    bad("missing field \"prompt_token_ids\": expected a list of token ids, found no such field");
  }
  if (f.prompt.type() != element_type::ARRAY) {
    bad(field("prompt_token_ids"), ": expected a list of token ids, found ", describe(f.prompt));
  }
  std::vector<int64_t> ids;
  size_t i = 0;
  for (element e : array(f.prompt)) {
    if (e.type() != element_type::INT64) {
      bad(field("prompt_token_ids"), " index ", i, ": expected an integer token id, found ",
          describe(e));
    }
    ids.push_back(int64_t(e));
    ++i;
  }
  return ids;
}

void parse_frame_prompt(const Fields& f, const ModelSpec& spec, const JobDefaults& d, Job& job) {
  std::vector<int64_t> ids = read_ids(f);
  const int P = spec.image_tokens, A = spec.action_tokens, S = spec.frame_slots();
  const int T = spec.temporal_rows;
  if (ids.empty() || ids.size() % size_t(S) != 0) {
    bad(field("prompt_token_ids"), ": expected a positive multiple of ", S, " ids (frames of ", P,
        " image + ", A, " action slots), found ", ids.size());
  }
  size_t n_ctx = ids.size() / size_t(S);
  if (T > 0 && n_ctx > size_t(T)) {
    bad(field("prompt_token_ids"), ": expected at most ", T, " context frames (", size_t(T) * S,
        " ids; ", round_size(spec, "the model's "), "), found ", n_ctx, " frames (", ids.size(),
        " ids)");
  }
  job.prompt.resize(ids.size());
  // Image ids lie in the image-id range the table sets (logit_begin/logit_end), else the vocab.
  const int lo = spec.sample_begin(), hi = spec.sample_end();
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t v = ids[i];
    size_t frame = i / size_t(S), slot = i % size_t(S);
    if (int(slot) < P) {
      if (v < lo || v >= hi) {
        bad(field("prompt_token_ids"), " index ", i, " (frame ", frame, ", image slot ", slot,
            "): expected an image token id in [", lo, ", ", hi, "), found ", v,
            v == d.placeholder_id ? " (the action placeholder)" : "");
      }
    } else {
      check_prompt_action_slot(v, i, frame, slot - size_t(P), spec, d);
    }
    job.prompt[i] = int32_t(v);
  }
  job.context_frames = int(n_ctx);
}

void parse_plain_prompt(const Fields& f, const ModelSpec& spec, const JobDefaults& d, Job& job) {
  std::vector<int64_t> ids = read_ids(f);
  if (ids.empty()) bad(field("prompt_token_ids"), ": expected at least 1 token id, found none");
  if (spec.max_positions > 0 && ids.size() >= size_t(spec.max_positions)) {
    bad(field("prompt_token_ids"), ": expected at most ", spec.max_positions - 1,
        " ids (max_position_embeddings ", spec.max_positions,
        " leaves room for 1 new token), found ", ids.size());
  }
  job.prompt.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t v = ids[i];
    if (v < 0 || v >= spec.vocab) {
      bad(field("prompt_token_ids"), " index ", i, ": expected a token id in [0, ", spec.vocab,
          "), found ", v,
          v == d.placeholder_id ? " (the action placeholder; this model has no action slots)" : "");
    }
    job.prompt[i] = int32_t(v);
  }
}

double sampling_number(element e, const char* name) {
  if (!is_number(e)) {
    bad(field(cat("sampling.", name).c_str()), ": expected a number, found ", describe(e));
  }
  return get_double(e);
}

void parse_sampling(const Fields& f, const JobDefaults& d, Job& job) {
  job.sampling = d.sampling;
  if (!f.has_sampling) return;
  if (f.sampling.type() != element_type::OBJECT) {
    bad(field("sampling"), ": expected an object with ", one_of(kSamplingFields), ", found ",
        describe(f.sampling));
  }
  std::vector<std::string_view> seen;
  for (auto kv : object(f.sampling)) {
    std::string_view key = kv.key;
    for (std::string_view s : seen)
      if (s == key)
        bad("field \"sampling.", key.substr(0, kShowChars),
            "\": expected each field once, found it a second time");
    seen.push_back(key);
    if (!known(kSamplingFields, key)) {
      bad(field("sampling"), ": unknown field ", quoted(key), ": expected ",
          one_of(kSamplingFields), ", found ", quoted(key));
    }
    element e = kv.value;
    if (e.type() == element_type::NULL_VALUE) continue;
    if (key == "temperature") {
      double t = sampling_number(e, "temperature");
      if (!(t == 0 || (t >= double(kMinTemperature) && t <= double(kFloatMax)))) {
        bad(field("sampling.temperature"), ": expected 0 (greedy) or a number in [1e-05, ",
            kFloatMax, "], found ", describe(e));
      }
      job.sampling.temperature = float(t);
    } else if (key == "top_k") {
      job.sampling.top_k =
          int(get_int(e, field("sampling.top_k"), 0, std::numeric_limits<int32_t>::max()));
    } else if (key == "top_p") {
      double p = sampling_number(e, "top_p");
      if (!(p > 0 && p <= 1)) {
        bad(field("sampling.top_p"), ": expected a number in (0, 1], found ", describe(e));
      }
      job.sampling.top_p = float(p);
    } else {  // seed
      if (e.type() == element_type::UINT64) {
        job.sampling.seed = uint64_t(e);
      } else if (e.type() == element_type::INT64 && int64_t(e) >= 0) {
        job.sampling.seed = uint64_t(int64_t(e));
      } else {
        bad(field("sampling.seed"), ": expected an integer in [0, 2^64), found ", describe(e));
      }
    }
  }
}

}  // namespace

namespace job_parse {

void parse_job(const element& root, int64_t line, const ModelSpec& spec, const JobDefaults& d,
               Job& job, IdInfo& id) {
  if (root.type() != element_type::OBJECT) {
    bad("expected a JSON object per line, found ", describe(root));
  }
  Fields f;
  element id_value;
  if (!object(root).at_key("id").get(id_value) && id_value.type() != element_type::NULL_VALUE) {
    f.id = id_value;
    f.has_id = true;
  }
  parse_id(f, id);  // first, so every later error carries the job's id
  collect_fields(object(root), spec, f);

  job = Job{};
  job.id = id.text;
  job.id_is_number = id.is_number;
  job.line = line;
  const int T = spec.temporal_rows;
  if (spec.has_frames()) {
    parse_frame_prompt(f, spec, d, job);
    if (!f.has_num_frames) {
      bad("missing field \"num_frames\": expected an integer in [1, ", kMaxJobFrames,
          "], found no such field");
    }
    job.num_frames = int(get_int(f.num_frames, field("num_frames"), 1, kMaxJobFrames));
    if (action_tokens(spec))
      parse_action_token_ids(f.has_action_ids, f.action_ids, spec, job);
    else
      parse_actions(f.has_actions, f.actions, spec, job);
    const int max_overlap = T - 1;
    if (f.has_overlap) {
      if (max_overlap < 1) {
        bad(field("overlap"), ": expected no overlap (", round_size(spec, "the "),
            ", so rounds cannot carry frames), found ", describe(f.overlap));
      }
      // Never clamped: a value above T - 1 is the job's mistake, said with the T it broke.
      const bool integer = f.overlap.type() == element_type::INT64;
      if (integer && int64_t(f.overlap) > max_overlap) {
        bad(field("overlap"), ": expected an integer in [1, ", max_overlap, "] (",
            round_size(spec, "the model's "), "), found ", describe(f.overlap));
      }
      job.overlap = int(get_int(f.overlap, field("overlap"), 1, max_overlap));
    } else {
      // JobReader has refused a --overlap (overlap_given) that does not fit; what is left to
      // fit is loom's own default, documented as min(3, T - 1).
      job.overlap = std::max(0, std::min(d.overlap, max_overlap));
    }
  } else {
    parse_plain_prompt(f, spec, d, job);
    if (!f.has_max_tokens) {
      bad("missing field \"max_tokens\": expected an integer >= 1, found no such field");
    }
    int64_t room = spec.max_positions > 0 ? spec.max_positions - int64_t(job.prompt.size())
                                          : std::numeric_limits<int32_t>::max();
    if (f.max_tokens.type() == element_type::INT64 && int64_t(f.max_tokens) > room &&
        int64_t(f.max_tokens) >= 1) {
      bad(field("max_tokens"), ": expected at most ", room, " (max_position_embeddings ",
          spec.max_positions, " - ", job.prompt.size(), " prompt tokens), found ",
          describe(f.max_tokens));
    }
    job.max_tokens = int(get_int(f.max_tokens, field("max_tokens"), 1, room));
    if (f.has_ignore_eos) {
      if (f.ignore_eos.type() != element_type::BOOL) {
        bad(field("ignore_eos"), ": expected true or false, found ", describe(f.ignore_eos));
      }
      job.ignore_eos = bool(f.ignore_eos);
    }
  }
  parse_sampling(f, d, job);
  job.num_samples = 1;
  if (f.has_num_samples) {
    job.num_samples = int(get_int(f.num_samples, field("num_samples"), 1, d.max_num_samples));
  }
}

}  // namespace job_parse

void check_job_defaults(const ModelSpec& spec, const JobDefaults& d) {
  if (!d.overlap_given || !spec.has_frames()) return;
  const int max_overlap = spec.temporal_rows - 1;
  if (max_overlap < 1) {
    fail("--overlap ", d.overlap, d.overlap_note, ": expected no --overlap for this model (",
         round_size(spec, "its "), ", so rounds cannot carry frames), found ", d.overlap);
  }
  if (d.overlap < 1 || d.overlap > max_overlap) {
    fail("--overlap ", d.overlap, d.overlap_note, ": expected an integer in [1, ", max_overlap,
         "] for this model (", round_size(spec, "its "), "), found ", d.overlap);
  }
}

namespace {
void check_frame_model(const ModelSpec& spec) {
  LOOM_CHECK(spec.has_frames(), "synthetic jobs need a frame model (num_image_patches in the ",
             "model's configuration); ",
             spec.architecture.empty() ? "this model" : spec.architecture, " generates no frames");
}
}  // namespace

void check_synthetic_frames(const ModelSpec& spec, int ctx, int frames) {
  check_frame_model(spec);
  const int T = spec.temporal_rows;
  if (ctx < 1 || (T > 0 && ctx > T))
    fail("--context-frames ", ctx, ": expected an integer in [1, ", T, "] for this model (",
         round_size(spec, "its "), "; a job's prompt holds at most one round), found ", ctx);
  if (frames < 1 || frames > kMaxJobFrames)
    fail("--frames ", frames, ": expected an integer in [1, ", kMaxJobFrames,
         "] (a job's num_frames), found ", frames);
}

Job synthetic_frame_job(const ModelSpec& spec, std::string id, int64_t line, uint32_t prompt_seed,
                        int ctx, int frames) {
  check_frame_model(spec);
  std::mt19937 rng(prompt_seed);
  std::uniform_int_distribution<int> tok(0, spec.vocab - 2);
  std::uniform_real_distribution<float> act(-1.0f, 1.0f);
  Job j;
  j.id = std::move(id);
  j.line = line;
  j.context_frames = ctx;
  j.num_frames = frames;
  j.overlap = std::max(0, std::min(JobDefaults{}.overlap, spec.temporal_rows - 1));  // as read
  if (action_tokens(spec)) {
    // Image ids from the image range, action ids from the rest of the vocab (or all of it).
    const int lo = spec.sample_begin(), hi = spec.sample_end();
    const int skip = spec.logit_end > 0 && hi - lo < spec.vocab ? hi - lo : 0;
    std::uniform_int_distribution<int> image(lo, hi - 1), other(0, spec.vocab - 1 - skip);
    auto action_id = [&] {
      const int v = other(rng);
      return v < lo ? v : v + skip;
    };
    for (int f = 0; f < ctx; f++) {
      for (int t = 0; t < spec.image_tokens; t++) j.prompt.push_back(image(rng));
      for (int a = 0; a < spec.action_tokens; a++) j.prompt.push_back(action_id());
    }
    j.action_id_rows = frames;
    for (int r = 0; r < frames * spec.action_tokens; r++) j.action_ids.push_back(action_id());
    return j;
  }
  for (int f = 0; f < ctx; f++) {
    for (int t = 0; t < spec.image_tokens; t++) j.prompt.push_back(tok(rng));
    for (int a = 0; a < spec.action_tokens; a++) j.prompt.push_back(JobDefaults{}.placeholder_id);
  }
  j.action_rows = spec.action_tokens * (ctx + frames);
  for (int r = 0; r < j.action_rows * spec.action_dim; r++) j.actions.push_back(act(rng));
  return j;
}

}  // namespace loom
