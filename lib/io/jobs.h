// JSONL jobs in (design §1, §8). A JobReader streams a jobs file line by line (never reads it
// whole) and turns each non-blank line into either a validated Job or a JobError that names
// the line, the field and what was expected. One bad line never stops the others.
//
// Job ids are compared by their text (job_ids.h): the integer 8 and the string "8" are the same
// id, for uniqueness within a run, for --resume and for `loom merge`; a line without an id is
// "line-N", the same id as an explicit "line-N". A record writes the id back with the JSON type
// the job gave it. The reader refuses a line whose id an earlier line of its shard already has:
// that line becomes a JobError naming both lines.
//
// Files: job_lines.{h,cpp} read the lines (JobReader) and write the "line N: ..." diagnostics,
// jobs.cpp is the schema (fields, types, ranges), job_actions.cpp a frame's action slots,
// job_ids.{h,cpp} the ids.
//
// Frame-model job:  {"id": "a", "prompt_token_ids": [...P image ids, A × -3, ...],
//                    "actions": [[lat, fwd, t], ...], "num_frames": 8,
//                    "sampling": {"temperature": 0.9, "top_k": 0, "top_p": 1.0, "seed": 0},
//                    "num_samples": 1}
// Action-token job (frames carry their actions as vocabulary ids, ActionProjection::Tokens):
//                   {"id": "c", "prompt_token_ids": [...P image ids, A action ids, ...],
//                    "action_token_ids": [[a1, .., aA], ...], "num_frames": 8, ...}
//                   one row of A ids after each generated frame (the last row optional).
// Plain-Llama job:  {"id": "b", "prompt_token_ids": [...], "max_tokens": 32, "sampling": {...}}
#pragma once

#include <atomic>
#include <cstdint>
#include <fstream>
#include <istream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/sampling_params.h"
#include "model/spec.h"

namespace loom {

struct Job {
  std::string id;               // "id" as given (a JSON integer is kept as its text); else "line-N"
  bool id_is_number = false;    // the job's "id" was a JSON integer: records write it back as one
  int64_t line = 0;             // 1-based line in the jobs file
  std::vector<int32_t> prompt;  // [n_ctx * S] (frames) or [n] (plain); action slots hold the
                                // placeholder, or the action ids for action-token models
  std::vector<float> actions;   // [action_rows, action_dim], row-major
  int action_rows = 0;
  std::vector<int32_t> action_ids;  // [action_id_rows, A] action-token models: row g follows
  int action_id_rows = 0;           // generated frame g (num_frames or num_frames - 1 rows)
  int context_frames = 0;           // n_ctx (frame models)
  int num_frames = 0;               // frames to generate (frame models)
  int max_tokens = 0;               // tokens to generate (plain models)
  bool ignore_eos = false;          // plain models: keep going past eos
  int overlap = 3;                  // frames carried into a new round
  SamplingParams sampling;
  int num_samples = 1;
  uint64_t line_hash = 0;  // fnv1a64 of the line's text (BOM and CR cut): records carry it
};

struct JobError {
  std::string id;  // the job's id when it could be read, else "line-N"
  int64_t line = 0;
  std::string message;  // "line 7: field \"actions\": expected 18 rows of 3 numbers, found 17"
  bool id_is_number = false;  // the id was read and was a JSON integer
  uint64_t line_hash = 0;     // as Job's; 0 for a line too long to hold
};

constexpr int kMaxJobFrames = 100000;                  // num_frames upper bound per job
constexpr size_t kMaxJobLineBytes = size_t(64) << 20;  // longer job lines are an error record

struct JobDefaults {
  int32_t placeholder_id = -3;  // token id marking an action slot in prompt_token_ids
  // Frames a new round carries where a job gives no "overlap". Given by the user (--overlap,
  // overlap_given) it must lie in [1, T - 1] (check_job_defaults); loom's own default 3 is
  // lowered to T - 1 for a model with fewer frames per round.
  int overlap = 3;
  bool overlap_given = false;
  std::string overlap_note;  // said after the value in a refusal: " (from LOOM_OVERLAP)"
  SamplingParams sampling;   // used where a job gives no "sampling" field
  int max_num_samples = 1024;
};

// Throws loom::Error when a default the user gave does not fit the model, naming the option,
// its value and the allowed range: "--overlap 9: expected an integer in [1, 5] for this model
// (a round holds 6 frames), found 9". Nothing is clamped.
void check_job_defaults(const ModelSpec& spec, const JobDefaults& defaults);

class JobReader {
 public:
  // path "-" reads stdin. Throws loom::Error when the file cannot be opened or when
  // check_job_defaults refuses `defaults`.
  JobReader(const std::string& path, const ModelSpec& spec, const JobDefaults& defaults);
  ~JobReader();
  // Reads the next non-blank line. Returns false at end of input, or with paused() when a
  // pipe ran dry after lines it skipped (another shard's, blank ones); otherwise exactly one of
  // `job` (ok == true) or `error` (ok == false) is filled. A line whose id an earlier line of
  // this shard has is an error ("line 9: field \"id\": \"dup\" is already the id of line 3;
  // expected ids unique within a run"). Memory: ~32 bytes per job line read (JobIdIndex), plus
  // the id texts when reading a stream rather than a regular file.
  bool next(Job& job, JobError& error, bool& ok);
  // Whether next() can go on without waiting for a writer: a regular file, or a whole line
  // already in the pipe (stdin, a FIFO). The engine reads a pipe only as far as it has arrived
  // while it has other work, so a writer that stops inside a line holds back no step.
  bool ready() const;
  // Whether the last next() returned false for want of input, not at its end: a pipe had no
  // whole line after lines it skipped, so the next line of this shard was not waited for.
  bool paused() const;
  int64_t lines_read() const;    // physical lines consumed, blank ones included
  int64_t records_read() const;  // non-blank lines consumed (skipped shard lines included)
  // FNV-1a 64 over every non-blank line consumed (each trimmed, every shard's), chained: with
  // records_read, what the shards of one run must agree they read (merge checks it).
  uint64_t lines_hash() const;
  // The line number of a last line left unread, 0 if none: it had no newline and was no
  // valid job, as a line still being written is (a writer that paused past the reader's
  // wait). It gets no record, so a later --resume runs it once it is whole.
  int64_t cut_last_line() const;
  // Keep only the jobs of shard `index` of `count`: the j-th non-blank line (0-based) belongs
  // to shard j mod count. Other lines are skipped unparsed. Call before the first next().
  void set_shard(int index, int count);
  // A flag (a signal's) that ends a read inside a line: next() then returns false as at the
  // end of input (read_job_line).
  void set_stop(const std::atomic<bool>* stop);
  // Tests only: replace the id hash (job_ids.h), e.g. by a constant to force collisions.
  // Call before the first next().
  void set_id_hash(uint64_t (*hash)(std::string_view id));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Validates one JSON line (the reader's core, exposed for tests and fuzzing).
// Returns true and fills `job`, or false and fills `error`.
bool parse_job_line(const std::string& text, int64_t line, const ModelSpec& spec,
                    const JobDefaults& defaults, Job& job, JobError& error);

// A synthetic frame job (benchmarks, tests): `ctx` context frames of random image ids (each
// followed by its action placeholders) and random action rows in [-1, 1) for ctx + frames
// frames, all drawn from `prompt_seed`: jobs with the same seed share their context frames.
// Action-token models: random action ids in place of the placeholders and one row of ids per
// generated frame.
// Default sampling; the caller sets it. Needs a frame model.
Job synthetic_frame_job(const ModelSpec& spec, std::string id, int64_t line, uint32_t prompt_seed,
                        int ctx, int frames);

// Throws loom::Error, naming bench's option, when synthetic jobs of `ctx` context frames and
// `frames` generated ones are no job `run` would take: a prompt of at most one round (T
// frames; the generated frames may pass it, in new rounds) and num_frames's range.
// "--context-frames 7: expected an integer in [1, 6] for this model (its temporal table has 6
// rows; ...), found 7"
void check_synthetic_frames(const ModelSpec& spec, int ctx, int frames);

}  // namespace loom
