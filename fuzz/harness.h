// One input of each fuzz target, shared by the libFuzzer entry points (fuzz_*.cpp) and by the
// corpus replay in tests/test_fuzz_corpus.cpp, so the suite re-runs exactly what the fuzzers
// ran. Contract: an input is either accepted or rejected with loom::Error; any other
// exception, a crash, a sanitizer report or a broken invariant (LOOM_FUZZ_ASSERT) is a bug.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/jobs.h"
#include "io/safetensors.h"
#include "model/mapping.h"
#include "model/roles.h"
#include "tests/tiny_spec.h"

// Aborts (a "crash" for libFuzzer, a test failure for the replay) when an accepted input
// breaks a promise its parser makes.
#define LOOM_FUZZ_ASSERT(cond)                                                                \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "fuzz invariant broken: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace loom::fuzz {

// ---- parse_job_line ------------------------------------------------------------------------

inline ModelSpec fuzz_frame_spec() {  // the tiny test model: P=10, A=3, dim 3, T=6
  return loom::test::tiny_frame_spec();
}

// Actions as vocabulary ids: P = 4 image + A = 2 action ids a frame, T = 3, vocab 100 of which
// [0, 90) are image ids.
inline ModelSpec fuzz_token_spec() {
  ModelSpec s;
  s.vocab = 100;
  s.image_tokens = 4;
  s.action_tokens = 2;
  s.temporal_rows = 3;
  s.max_positions = 18;
  s.logit_end = 90;
  s.action_projection = ActionProjection::Tokens;
  return s;
}

inline ModelSpec fuzz_plain_spec() {
  ModelSpec s;
  s.vocab = 1000;
  s.max_positions = 64;
  return s;
}

// Never throws by contract: a bad line is a JobError.
inline void jobs_input(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const ModelSpec frame = fuzz_frame_spec(), plain = fuzz_plain_spec(),
                         tokens = fuzz_token_spec();
  JobDefaults d;
  for (const ModelSpec* spec : {&frame, &plain, &tokens}) {
    Job job;
    JobError error;
    if (!parse_job_line(text, 41, *spec, d, job, error)) {
      LOOM_FUZZ_ASSERT(error.line == 41);
      LOOM_FUZZ_ASSERT(error.message.rfind("line 41: ", 0) == 0);
      LOOM_FUZZ_ASSERT(!error.id.empty());
      continue;
    }
    LOOM_FUZZ_ASSERT(!job.id.empty() && job.line == 41);
    LOOM_FUZZ_ASSERT(job.num_samples >= 1 && job.num_samples <= d.max_num_samples);
    LOOM_FUZZ_ASSERT(job.sampling.temperature >= 0 && std::isfinite(job.sampling.temperature));
    LOOM_FUZZ_ASSERT(job.sampling.top_p > 0 && job.sampling.top_p <= 1 && job.sampling.top_k >= 0);
    if (spec->action_projection == ActionProjection::Tokens) {
      const int S = spec->frame_slots(), P = spec->image_tokens, A = spec->action_tokens;
      auto action_id = [&](int32_t v) { return v >= spec->logit_end && v < spec->vocab; };
      LOOM_FUZZ_ASSERT(job.context_frames >= 1 && job.context_frames <= spec->temporal_rows);
      LOOM_FUZZ_ASSERT(job.prompt.size() == size_t(job.context_frames) * size_t(S));
      LOOM_FUZZ_ASSERT(job.action_id_rows == job.num_frames ||
                       job.action_id_rows == job.num_frames - 1);
      LOOM_FUZZ_ASSERT(job.action_ids.size() == size_t(job.action_id_rows) * size_t(A));
      LOOM_FUZZ_ASSERT(job.actions.empty() && job.action_rows == 0);
      for (int32_t a : job.action_ids) LOOM_FUZZ_ASSERT(action_id(a));
      for (size_t i = 0; i < job.prompt.size(); ++i)
        LOOM_FUZZ_ASSERT(int(i % size_t(S)) >= P ? action_id(job.prompt[i])
                                                 : job.prompt[i] >= 0 && job.prompt[i] < 90);
      LOOM_FUZZ_ASSERT(job.overlap >= 1 && job.overlap < spec->temporal_rows);
    } else if (spec->has_frames()) {
      const int S = spec->frame_slots(), A = spec->action_tokens;
      LOOM_FUZZ_ASSERT(job.context_frames >= 1 && job.context_frames <= spec->temporal_rows);
      LOOM_FUZZ_ASSERT(job.prompt.size() == size_t(job.context_frames) * size_t(S));
      LOOM_FUZZ_ASSERT(job.num_frames >= 1 && job.num_frames <= kMaxJobFrames);
      LOOM_FUZZ_ASSERT(job.action_rows == A * (job.context_frames + job.num_frames) ||
                       job.action_rows == A * (job.context_frames + job.num_frames - 1));
      LOOM_FUZZ_ASSERT(job.actions.size() == size_t(job.action_rows) * size_t(spec->action_dim));
      for (float a : job.actions) LOOM_FUZZ_ASSERT(std::isfinite(a));
      for (size_t i = 0; i < job.prompt.size(); ++i) {
        bool action_slot = int(i % size_t(S)) >= spec->image_tokens;
        LOOM_FUZZ_ASSERT(action_slot ? job.prompt[i] == d.placeholder_id
                                     : job.prompt[i] >= 0 && job.prompt[i] < spec->vocab);
      }
      LOOM_FUZZ_ASSERT(job.overlap >= 1 && job.overlap < spec->temporal_rows);
    } else {
      LOOM_FUZZ_ASSERT(!job.prompt.empty() && job.actions.empty());
      for (int32_t t : job.prompt) LOOM_FUZZ_ASSERT(t >= 0 && t < spec->vocab);
      LOOM_FUZZ_ASSERT(job.max_tokens >= 1 &&
                       job.prompt.size() + size_t(job.max_tokens) <= size_t(spec->max_positions));
    }
  }
}

// ---- SafetensorsFile -----------------------------------------------------------------------

// The input becomes the whole file: one memfd, rewritten per input, opened by its /proc path.
inline std::string memfd_path(const uint8_t* data, size_t size) {
  static int fd = memfd_create("loom-fuzz-safetensors", 0);
  LOOM_FUZZ_ASSERT(fd >= 0);
  LOOM_FUZZ_ASSERT(ftruncate(fd, 0) == 0);
  for (size_t done = 0; done < size;) {
    ssize_t w = pwrite(fd, data + done, size - done, off_t(done));
    LOOM_FUZZ_ASSERT(w > 0);
    done += size_t(w);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

// Reads every byte an accepted file claims, so a range past the mapping faults here.
inline uint64_t touch_all(const SafetensorsFile& f) {
  uint64_t sum = 0;
  for (const SafetensorsFile::Entry& e : f.entries()) {
    LOOM_FUZZ_ASSERT(e.begin <= e.end && e.end <= f.file_size());
    Tensor t = f.tensor(e);
    LOOM_FUZZ_ASSERT(t.nbytes() == e.nbytes());
    const auto* p = static_cast<const uint8_t*>(t.data);
    for (uint64_t i = 0; i < e.nbytes(); ++i) sum += p[i];
  }
  return sum;
}

// Throws loom::Error when the file is rejected.
inline void safetensors_input(const uint8_t* data, size_t size) {
  SafetensorsFile f = SafetensorsFile::open(memfd_path(data, size));
  volatile uint64_t sink = touch_all(f);
  (void)sink;
  for (const SafetensorsFile::Entry& e : f.entries()) LOOM_FUZZ_ASSERT(f.find(e.name) == &e);
}

// ---- Checkpoint index (model.safetensors.index.json) ---------------------------------------

// A checkpoint directory with config.json and two valid shards; the input becomes its index.
inline const std::string& checkpoint_dir() {
  static const std::string dir = [] {
    // tmpfs when there is one: a disk-backed /tmp makes this target ~40x slower.
    const char* base = std::getenv("TMPDIR");
    std::string root = base && *base                               ? base
                       : std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                                                   : "/tmp";
    static std::string d = root + "/loom-fuzz-ckpt-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    });
    std::ofstream(d + "/config.json") << "{\"architectures\":[\"LlamaForCausalLM\"]}";
    auto shard = [&](const std::string& name, const std::string& header, size_t data_bytes) {
      std::string h = header;
      h.append((8 - h.size() % 8) % 8, ' ');
      uint64_t n = h.size();
      std::ofstream out(d + "/" + name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(&n), 8);
      out << h << std::string(data_bytes, '\x01');
    };
    shard("model-00001-of-00002.safetensors",
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
          R"("b":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]}})",
          16);
    shard(
        "model-00002-of-00002.safetensors",
        R"({"__metadata__":{"format":"pt"},"c":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}})",
        6);
    return d;
  }();
  return dir;
}

// Throws loom::Error when the index (or what it names) is rejected.
inline void checkpoint_index_input(const uint8_t* data, size_t size) {
  const std::string& dir = checkpoint_dir();
  {
    std::ofstream out(dir + "/model.safetensors.index.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  std::shared_ptr<Checkpoint> ck = Checkpoint::open(dir);
  for (const std::string& name : ck->names()) {
    LOOM_FUZZ_ASSERT(ck->has(name) && ck->find(name) != nullptr);
    Tensor t = ck->tensor(name);
    LOOM_FUZZ_ASSERT(t.nbytes() == ck->find(name)->nbytes());
    LOOM_FUZZ_ASSERT(ck->file_of(name).rfind(dir + "/", 0) == 0);  // never outside the dir
  }
}

// ---- Mapping tables (models/*.json) ------------------------------------------------------

// The tiny checkpoints in testdata/ a mutated table is loaded on, each with the table it was
// made for (models/<table>): every bundled model family.
struct TableCase {
  const char* table;
  const char* checkpoint;
};
inline const std::vector<TableCase>& table_cases() {
  static const std::vector<TableCase> cases = {{"llama.json", "tiny_llama"},
                                               {"llama_action.json", "tiny_v1"},
                                               {"llama_action_v2.json", "tiny_v2"},
                                               {"llama_meta.json", "tiny_llama_meta"},
                                               {"opt.json", "tiny_opt"},
                                               {"gpt2.json", "tiny_gpt2"},
                                               {"llama_action_tokens.json", "tiny_action_tokens"}};
  return cases;
}

// Where table_input writes its table: a folder of this process, removed at exit.
inline const std::string& table_path() {
  static const std::string path = [] {
    const char* base = std::getenv("TMPDIR");
    std::string root = base && *base                               ? base
                       : std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                                                   : "/tmp";
    static std::string d = root + "/loom-fuzz-table-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    });
    return d + "/fuzz_table.json";
  }();
  return path;
}

// The input becomes a mapping table, loaded with load_model on the tiny checkpoint `ckpt`
// (a folder of testdata/). Contract: load_model returns weights that hold every role the
// spec's features need in the shape loom needs (check_weights), or throws loom::Error whose
// message names the table file. Returns the model (its spec is what backends would get).
inline LoadedModel table_input(const uint8_t* data, size_t size, const std::string& ckpt) {
  const std::string& path = table_path();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  LoadOptions opt;
  opt.table_path = path;
  LoadedModel m;
  try {
    m = load_model(std::string(LOOM_TESTDATA) + "/" + ckpt, opt);
  } catch (const Error& e) {
    if (std::string(e.what()).find("fuzz_table.json") == std::string::npos) {
      std::fprintf(stderr, "load error does not name the table: %s\n", e.what());
      LOOM_FUZZ_ASSERT(!"a table error names the table");
    }
    throw;
  }
  try {
    check_weights(m.spec, m.weights, "fuzz");
  } catch (const Error& e) {
    std::fprintf(stderr, "loaded weights disagree with their spec: %s\n", e.what());
    LOOM_FUZZ_ASSERT(!"an accepted table gives the weights its spec needs");
  }
  return m;
}

// libFuzzer entry: one table, tried on every tiny checkpoint.
inline void tables_input(const uint8_t* data, size_t size) {
  int loaded = 0;
  for (const TableCase& c : table_cases()) {
    try {
      table_input(data, size, c.checkpoint);
      ++loaded;
    } catch (const Error&) {
    }
  }
  if (loaded == 0) fail("the table loads on no tiny checkpoint");
}

}  // namespace loom::fuzz
