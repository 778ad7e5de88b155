// The loom CLI's subcommands. main.cpp parses arguments (CLI11) into these option structs and
// maps loom::Error to one line on stderr and an exit code; each command lives in its own file.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/scheduler.h"

namespace loom {

// Exit codes (README "Exit codes").
constexpr int kExitOk = 0;             // every job finished
constexpr int kExitJobsFailed = 1;     // the run finished, some jobs wrote error records
constexpr int kExitFatal = 2;          // nothing useful ran: bad arguments, model, or output
constexpr int kExitInterrupted = 130;  // SIGINT / SIGTERM: finished records kept, report written

// What std::bad_alloc means to a user (main.cpp, the run's log and side file).
constexpr const char* kOutOfHostMemory =
    "out of host memory: the model's weights and the KV pool must fit; lower --kv-cache-gib or "
    "--kv-blocks (the pool), or --max-seqs";
// An exception's message as loom says it (std::bad_alloc as kOutOfHostMemory).
std::string error_text(const std::exception& e);

// Defaults are the ones `--help` shows; a user's value, from the command line or a LOOM_<OPTION>
// variable (run only), replaces them once app/cli_options.cpp's validators have checked it.
struct EngineArgs {
  std::string backend = "auto";  // auto | cpu | cuda
  std::string dtype = "auto";    // auto | bf16 | f32
  int device = 0;
  int max_seqs = SchedulerOptions{}.max_seqs;
  int max_batch_slots = SchedulerOptions{}.max_batch_slots;
  int block_size = 0;  // 0: the backend's (Backend::default_block_size)
  int kv_blocks = 0;
  double gpu_memory_fraction = 0.9;
  double kv_cache_gib = 2.0;
  bool no_prefix_sharing = false;
  bool no_overlap = false;       // run each step to its end before scheduling the next
  bool megakernel = false;       // decode steps of 1-8 sequences as one persistent launch
  bool batch_invariant = false;  // README "Batch invariance"
  std::string model_table;
  std::string kv_dtype = "auto";  // auto | bf16 | fp8 (README "FP8 KV cache")
  std::string kv_scales;          // fp8: scales file from loom calibrate
};

struct RunArgs {
  std::string model, jobs, out, report, tokens_out;
  EngineArgs engine;
  int placeholder_id = -3;
  int overlap = 3;
  bool overlap_given = false;  // --overlap (or LOOM_OVERLAP) set: it must fit the model
  std::string overlap_note;    // " (from LOOM_OVERLAP)" when the variable set it
  bool resume = false;
  bool overwrite = false;  // replace a finished --out (and this shard's dataset)
  bool no_lock = false;    // file systems without fcntl locks: the user vouches for one writer
  std::string shard;       // "K/N", "auto" or "array"; empty: every job
  int64_t samples_per_file = 0;  // dataset files: 0 = fill to 256 MiB
  double file_seconds = 60;      // dataset files: commit at least this often
  bool no_tokens_in_results = false;
  bool no_dataset_actions = false, no_dataset_context = false;
  double progress_interval = 30;
  bool quiet = false;
  std::string log_format = "text";  // text | json (app/log.h)
  SamplingParams sampling;  // --seed, --temperature, --top-k, --top-p: what a job's "sampling"
                            // leaves out (JobDefaults::sampling)
  // The LOOM_<OPTION> variables that set an option here (the command line gave it no value),
  // e.g. {"LOOM_MAX_SEQS"}: the report records them.
  std::vector<std::string> from_env;
};

struct InspectArgs {
  std::string model, model_table;
  bool json = false;  // spec, roles and job template as one JSON object
};

struct BenchArgs {
  std::string model, json_out;
  EngineArgs engine;
  int context_frames = 3;
  int frames = 4;
  std::vector<int> batch_sizes{1};
  int num_jobs = 0;          // throughput run: this many jobs at once (0: off)
  int shared_group = 0;      // throughput run: groups of this size share context frames
  bool shared_only = false;  // with shared_group: leave out the unshared pass
  int repeats = 1;
  bool profile = false;
  bool overwrite = false;  // replace an existing --json file
};

// `loom calibrate`: FP8 KV scales from rollouts of real jobs (app/calibrate.cpp).
struct CalibrateArgs {
  std::string model, jobs, out;
  EngineArgs engine;
  int placeholder_id = -3;
  int overlap = 3;
  bool overlap_given = false;
  double margin = 1.25;              // s = absmax · margin / 448
  int held_out_every = 4;            // every Nth job checks the scales instead of setting them
  std::string granularity = "head";  // head | layer
  bool overwrite = false;            // replace an existing --out
};

int run_command(const RunArgs& args);
int calibrate_command(const CalibrateArgs& args);
int inspect_command(const InspectArgs& args);
struct MergeArgs {
  std::vector<std::string> inputs, reports;  // results files, or --reports files
  std::string jobs, out, dataset;
  bool allow_partial = false;
  bool overwrite = false;  // replace an existing --out
  bool no_lock = false;    // --dataset: skip the shards' locks (file systems without locks)
};

struct VerifyArgs {
  std::string dir;  // a --tokens-out folder
  int threads = 0;  // 0: one a core, at most 8
  bool json = false;
};
int verify_command(const VerifyArgs& args);

// `loom merge`: results files (with --jobs), --reports, or --dataset; exactly one form.
int merge_command(const MergeArgs& args);
int bench_command(const BenchArgs& args);
// `loom merge --reports R... --out F`: the shards' run reports merged into one (report_merge.h).
int merge_reports_command(const std::vector<std::string>& reports, const std::string& out,
                          bool overwrite);

}  // namespace loom
