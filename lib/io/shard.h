// Scale-out over existing launchers (design §11, issue 5 §4). N processes (Slurm tasks, array
// elements, MPI ranks, torchrun-style RANK/WORLD_SIZE) read the same jobs file and each keeps
// the jobs of its shard: the job on the j-th non-blank line (0-based) belongs to shard j mod N.
// Round-robin, not contiguous blocks, so a file sorted by size still spreads evenly, and no
// process has to count the lines first. Each shard writes its own results file
// (shard_path); `loom merge` (merge.h) joins them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace loom {

struct Shard {
  int index = 0;       // K: this process's shard, 0 <= K < N
  int count = 1;       // N: number of shards; 1 = unsharded
  std::string source;  // where K and N came from: "--shard", "SLURM_PROCID/SLURM_NTASKS", ...
};

// "K/N" with 0 <= K < N (the --shard flag). Throws loom::Error saying what was expected.
Shard parse_shard(const std::string& text);

// Reads K and N from the launcher's environment, first source with N > 1 wins:
//   SLURM_PROCID/SLURM_NTASKS (srun tasks), combined with
//   SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT (job arrays; ids are counted from
//   SLURM_ARRAY_TASK_MIN in steps of SLURM_ARRAY_TASK_STEP when set) — an array of srun steps
//   gets K = array_index * ntasks + procid, N = array_count * ntasks;
//   then OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (mpirun), then RANK/WORLD_SIZE.
// None set (or all N == 1): {0, 1, "none"}. Malformed values throw loom::Error naming the
// variable. `env` replaces getenv (tests); nullptr uses the process environment.
using EnvLookup = std::function<const char*(const char*)>;
Shard shard_from_env(const EnvLookup& env = nullptr);

// Whether the job on non-blank line j (0-based) belongs to `shard`.
inline bool in_shard(int64_t j, const Shard& shard) {
  return shard.count <= 1 || j % shard.count == shard.index;
}

// "out.jsonl" → "out.shard-K-of-N.jsonl" when N > 1 ("out" → "out.shard-K-of-N");
// unchanged for N == 1 and for "-" (stdout).
std::string shard_path(const std::string& path, const Shard& shard);

}  // namespace loom
