// Scale-out over existing launchers (design §11, issue 5 §4). N processes read the same jobs
// file and each keeps the jobs of its shard: the job on the j-th non-blank line (0-based)
// belongs to shard j mod N. Round-robin, not contiguous blocks, so a file sorted by size still
// spreads evenly, and no process has to count the lines first. Each shard writes its own
// results file (shard_path); `loom merge` (merge.h) joins them.
//
// A shard is never guessed: it comes only from --shard. Environments lie about intent (a
// plain `loom run` in an sbatch script sees SLURM_NTASKS=4; each task of a Slurm array
// usually has its own jobs file), and a guessed shard silently drops the other N-1 parts.
//   --shard K/N    exactly that.
//   --shard auto   the ranks of a launcher that started several loom processes (see
//                  resolve_shard); none found: 0/1.
//   --shard array  the Slurm array task: one jobs file shared by every task of the array.
//   no --shard     0/1 whatever the environment; unrequested_shard_warning says so when the
//                  environment shows several tasks (as it does for auto without a launcher).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace loom {

struct Shard {
  int index = 0;       // K: this process's shard, 0 <= K < N
  int count = 1;       // N: number of shards; 1 = unsharded
  std::string source;  // where K and N came from, read as "shard K/N from <source>":
                       // "--shard", "SLURM_PROCID/SLURM_STEP_NUM_TASKS", ...
};

// `env` replaces getenv (tests); nullptr uses the process environment.
using EnvLookup = std::function<const char*(const char*)>;

// "K/N" with 0 <= K < N. Throws loom::Error saying what --shard accepts.
Shard parse_shard(const std::string& text);

// flag: the --shard value: "" (unsharded), "K/N", "auto" or "array". The CLI refuses a typed
// `--shard ""` before this, so "" here is only ever "no --shard".
//
// auto takes the first of these rank/size pairs that is set, innermost launcher first (srun
// often starts torchrun or mpirun, and then the Slurm step counts the launchers, not loom):
//   RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (Open MPI mpirun),
//   PMI_RANK/PMI_SIZE (MPICH, Intel MPI, srun --mpi=pmi2),
//   SLURM_PROCID/SLURM_STEP_NUM_TASKS, only inside an srun step: SLURM_STEP_ID holds a
//     regular step number. The batch script is no srun step: released Slurm leaves
//     SLURM_STEP_ID unset there, newer Slurm writes its special id (0xfffffffb) with %d as
//     "-5", and tools print "batch"/"extern"/"interactive"; all of these mean no step.
//     SLURM_NTASKS and the batch script's SLURM_PROCID are never read.
//   PMIX_RANK: PMIx puts no process count in the environment (a PMIx program asks its server
//     for PMIX_JOB_SIZE), so it only pairs with SLURM_STEP_NUM_TASKS (srun --mpi=pmix, where
//     it must equal SLURM_PROCID); alone it is an error that asks for --shard K/N.
// None set: {0, 1, "--shard auto: no launcher found"}. Every pair is read, not only the one
// taken, and any two found must agree: the same rank and size, or the inner (earlier) one
// counting more processes, started by the outer (one torchrun or mpirun daemon per srun task).
// Else both are named in an error: a batch script that exports RANK=0 WORLD_SIZE=3 before
// `srun -n 3` must not give all three tasks shard 0. A rank without its size (or the reverse)
// is an error whatever other launcher is complete; PMIX_RANK, sizeless by design, is the one
// lone rank, compared with SLURM_PROCID only when the srun step is the launcher taken.
// array: SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, the id counted from SLURM_ARRAY_TASK_MIN
// in steps of SLURM_ARRAY_TASK_STEP (when set); an error when the array variables are unset.
// With SLURM_ARRAY_TASK_MAX the id must not pass it and COUNT must be (MAX - MIN) / STEP + 1,
// which refuses irregular arrays (--array=1,3,7) and variables left from another array.
// Malformed values, a rank without its size (or the reverse) and rank >= size throw
// loom::Error naming the variables.
Shard resolve_shard(const std::string& flag, const EnvLookup& env = nullptr);

// Without --shard (flag "") or with --shard auto that found no launcher (flag "auto"): a
// one-line warning (no "loom: warning: " prefix, no newline) when the environment shows a
// launcher or array of more than one task (SLURM_NTASKS, SLURM_STEP_NUM_TASKS,
// SLURM_ARRAY_TASK_COUNT, OMPI_COMM_WORLD_SIZE, PMI_SIZE or WORLD_SIZE above 1, PMIX_RANK
// above 0); "" otherwise. Never throws: an unreadable value is no sign.
std::string unrequested_shard_warning(const EnvLookup& env = nullptr, const std::string& flag = "");

// Whether the job on non-blank line j (0-based) belongs to `shard`.
inline bool in_shard(int64_t j, const Shard& shard) {
  return shard.count <= 1 || j % shard.count == shard.index;
}

// "out.jsonl" → "out.shard-K-of-N.jsonl" when N > 1 ("out" → "out.shard-K-of-N");
// unchanged for N == 1 and for "-" (stdout).
std::string shard_path(const std::string& path, const Shard& shard);

// For N > 1, throws loom::Error naming `option` (--out, --report) when the file name of `path`
// already has a `.shard-K-of-N` tag: shard_path would tag it again, and `loom merge` reads the
// first tag. Unsharded, a tagged name is only a name (a shard rerun by hand), and passes.
void check_untagged(const std::string& option, const std::string& path, const Shard& shard);

}  // namespace loom
