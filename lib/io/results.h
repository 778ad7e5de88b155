// Results out (design §1, §8): one JSON line per finished sample of a job (or one error line
// per failed job), appended and flushed as soon as it is known, so a crash costs only the work
// in flight.
//
// {"id":"a","sample":0,"status":"ok","line":1,"frames":[[...P ids],[...]],
//  "timing":{"queue_s":0.0,"prefill_s":0.1,"decode_s":2.3,"total_s":2.4,"frame_s":[...]},
//  "prompt_slots":39,"cached_slots":26}
// {"id":"b","sample":0,"status":"ok","line":2,"tokens":[...],"finish_reason":"length", ...}
// {"id":"line-3","status":"error","line":3,"error":"line 3: field \"num_frames\": ..."}
// {"id":8,"sample":0,...}: an id keeps the JSON type the job gave it (a string or an integer).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loom {

struct Job;

struct JobResult {
  std::string id;
  bool id_is_number = false;  // "id": 8 in the job, written back as 8
  int64_t line = 0;
  uint64_t line_hash = 0;  // the job line's (Job::line_hash); 0: not written
  uint32_t sample = 0;
  uint64_t seed = 0;  // the job's sampling seed (dataset metadata)
  bool ok = true;
  std::string error;                         // when !ok
  bool has_frames = false;                   // frame model: `frames`, else `tokens`
  std::vector<std::vector<int32_t>> frames;  // [num_frames][P]
  std::vector<int32_t> tokens;               // plain models
  std::string finish_reason;                 // plain models: "length" or "eos"
  int prompt_slots = 0;                      // slots prefilled for this sample, all rounds
  int cached_slots = 0;                      // of those, served from shared blocks
  double queue_s = 0, prefill_s = 0, decode_s = 0, total_s = 0;
  std::vector<double> frame_s;         // seconds per generated frame
  std::shared_ptr<const Job> job;      // ok results: the job (the dataset reads it)
  std::string tokens_file;             // --tokens-out: the data file holding it
  int64_t row_begin = 0, row_end = 0;  // its rows there (plain models: tokens)
  bool include_tokens = true;          // false: --no-tokens-in-results
};

std::string result_to_json(const JobResult& r);  // one line, no trailing newline

// The id with the JSON type the job gave it: a string, or an integer (int64, or uint64 above
// INT64_MAX) kept as its text since jobs.cpp read it. Throws if marked a number but not one.
nlohmann::ordered_json id_value(const JobResult& r);

class ResultWriter {
 public:
  // path "-" writes stdout. Appends when `append` (resume); throws loom::Error if unwritable.
  ResultWriter(const std::string& path, bool append);
  ~ResultWriter();
  void write(const JobResult& r);  // writes one line and flushes it
  void sync();                     // fsync (no-op on stdout)

 private:
  [[noreturn]] void write_failed() const;  // names the file and errno's reason
  std::FILE* f_ = nullptr;
  bool owned_ = false;
  std::string path_;
};

}  // namespace loom
