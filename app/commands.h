// The loom CLI's subcommands. main.cpp parses arguments (CLI11) into these option structs and
// maps loom::Error to one line on stderr and an exit code; each command lives in its own file.
#pragma once

#include <string>
#include <vector>

namespace loom {

// Exit codes (README "Exit codes").
constexpr int kExitOk = 0;             // every job finished
constexpr int kExitJobsFailed = 1;     // the run finished, some jobs wrote error records
constexpr int kExitFatal = 2;          // nothing useful ran: bad arguments, model, or output
constexpr int kExitInterrupted = 130;  // SIGINT / SIGTERM: finished records kept, report written

struct EngineArgs {
  std::string backend = "auto";  // auto | cpu | cuda
  std::string dtype = "auto";    // auto | bf16 | f32
  int device = 0;
  int max_seqs = 256;
  int max_batch_slots = 2048;
  int block_size = 16;
  int kv_blocks = 0;
  double gpu_memory_fraction = 0.9;
  double kv_cache_gib = 2.0;
  bool no_prefix_sharing = false;
  bool batch_invariant = false;  // README "Batch invariance"
  std::string model_table;
};

struct RunArgs {
  std::string model, jobs, out, report, tokens_out;
  EngineArgs engine;
  int placeholder_id = -3;
  int overlap = 3;
  bool resume = false;
  std::string shard;  // "K/N", "auto" or "array" (resolve_shard); empty: every job
  double progress_interval = 30;
  bool quiet = false;
};

struct BenchArgs {
  std::string model, json_out;
  EngineArgs engine;
  int context_frames = 3;
  int frames = 4;
  std::vector<int> batch_sizes{1};
  int jobs = 0;              // throughput run: this many jobs at once (0: off)
  int shared_group = 0;      // throughput run: groups of this size share context frames
  bool shared_only = false;  // with shared_group: leave out the unshared pass
  int repeats = 1;
  bool profile = false;
};

int run_command(const RunArgs& args);
int inspect_command(const std::string& model_dir, const std::string& model_table);
int merge_command(const std::vector<std::string>& inputs, const std::string& jobs,
                  const std::string& out);
int bench_command(const BenchArgs& args);

}  // namespace loom
