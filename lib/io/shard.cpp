// Shard selection (shard.h).
#include "io/shard.h"

#include <cstdlib>
#include <limits>
#include <optional>
#include <regex>
#include <vector>

#include "core/error.h"

namespace loom {
namespace {

// A whole decimal number in [0, max]; false for anything else.
bool parse_whole(const std::string& s, int64_t max, int64_t& out) {
  if (s.empty() || s.size() > 10) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > max) return false;
  out = v;
  return true;
}

bool parse_count(const std::string& s, int64_t& out) {
  return parse_whole(s, std::numeric_limits<int32_t>::max(), out);
}

struct Env {
  const EnvLookup& lookup;
  const char* raw(const char* name) const { return lookup ? lookup(name) : std::getenv(name); }
  std::string text(const char* name) const {
    const char* v = raw(name);
    return v ? v : "";
  }
  bool has(const char* name) const { return !text(name).empty(); }
  int64_t get(const char* name) const {
    int64_t out = 0;
    if (!parse_count(text(name), out)) {
      fail("environment variable ", name, "=", text(name),
           ": expected a non-negative integer, found something else; unset it or fix the "
           "launcher");
    }
    return out;
  }
  // The value when set and well formed; the warning reads with this, since it must not throw.
  std::optional<int64_t> peek(const char* name) const {
    int64_t out = 0;
    if (!parse_count(text(name), out)) return std::nullopt;
    return out;
  }
};

Shard checked(int64_t k, int64_t n, std::string source) {
  if (!(n >= 1 && k >= 0 && k < n)) {
    fail("shard from ", source, ": expected 0 <= K < N, found K = ", k, ", N = ", n);
  }
  return Shard{int(k), int(n), std::move(source)};
}

// Whether a launcher set the pair a, b: false when neither is set, an error when one is.
bool has_pair(const Env& env, const char* a, const char* b) {
  if (!env.has(a) && !env.has(b)) return false;
  LOOM_CHECK(env.has(a), b, "=", env.text(b), " but ", a, " is not set: expected both, found one");
  LOOM_CHECK(env.has(b), a, "=", env.text(a), " but ", b, " is not set: expected both, found one");
  return true;
}

Shard from_pair(const Env& env, const char* rank, const char* size) {
  return checked(env.get(rank), env.get(size), cat(rank, "/", size));
}

// Whether SLURM_STEP_ID names an srun step. Slurm numbers regular steps below
// SLURM_MAX_NORMAL_STEP_ID (0xfffffff0); the batch, extern and interactive steps carry ids
// above it, written with %d (so "-5" for the batch step) by Slurm versions that write them at
// all, and printed by name by its tools.
bool in_srun_step(const Env& env) {
  const std::string id = env.text("SLURM_STEP_ID");
  if (id.empty() || id == "batch" || id == "extern" || id == "interactive") return false;
  constexpr int64_t kMaxNormalStepId = 0xfffffff0;
  int64_t v = 0;
  const bool negative = id[0] == '-';
  if (!parse_whole(negative ? id.substr(1) : id, 0xffffffff, v)) {
    fail("environment variable SLURM_STEP_ID=", id,
         ": expected a step number (or batch, extern, interactive), found something else; "
         "unset it or fix the launcher");
  }
  return !negative && v < kMaxNormalStepId;
}

// A launcher's rank/size pair as found, for the message when two disagree.
struct Found {
  const char* rank;
  const char* size;
  Shard shard;
};

// Launcher `inner` is read before `outer` (shard.h): both must count the same processes, or
// `inner` more of them, being started by `outer` (one torchrun or mpirun daemon per srun task).
// Anything else is a stale or foreign variable, and taking either pair would hand two
// processes one shard, or leave shards unrun.
void check_agree(const Found& inner, const Found& outer) {
  const Shard& i = inner.shard;
  const Shard& o = outer.shard;
  if ((i.index == o.index && i.count == o.count) || i.count > o.count) return;
  fail(inner.rank, "=", i.index, ", ", inner.size, "=", i.count, " but ", outer.rank, "=", o.index,
       ", ", outer.size, "=", o.count, ": expected the same rank and size, or ", inner.size,
       " above ", outer.size,
       " (a launcher started by the other), found neither; unset the stale variables or pass "
       "--shard K/N");
}

Shard from_launcher(const Env& env) {
  // Every pair is read, not just the first set: a half pair is an error whatever else is set,
  // and every two launchers found must agree (check_agree).
  std::vector<Found> found;  // innermost first
  const char* pairs[][2] = {{"RANK", "WORLD_SIZE"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"}};
  for (auto& [rank, size] : pairs)
    if (has_pair(env, rank, size)) found.push_back({rank, size, from_pair(env, rank, size)});
  if (in_srun_step(env)) {
    LOOM_CHECK(has_pair(env, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS"),
               "SLURM_STEP_ID=", env.text("SLURM_STEP_ID"),
               " but SLURM_PROCID and SLURM_STEP_NUM_TASKS are not set: expected both (srun sets "
               "them), found neither");
    found.push_back({"SLURM_PROCID", "SLURM_STEP_NUM_TASKS",
                     from_pair(env, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS")});
    // srun --mpi=pmix gives each task PMIX_RANK = SLURM_PROCID. Anything else, with no
    // launcher inside the step to count them, is a PMIx launcher started by srun, whose own
    // processes the step's ranks do not count. (Inside an mpirun or torchrun, PMIX_RANK may
    // be either launcher's rank, so it is not compared there.)
    const Shard& s = found.back().shard;
    LOOM_CHECK(found.size() > 1 || !env.has("PMIX_RANK") || env.get("PMIX_RANK") == s.index,
               "PMIX_RANK=", env.text("PMIX_RANK"), " but SLURM_PROCID=", s.index,
               ": expected the same rank (srun --mpi=pmix), found a PMIx launcher inside an srun "
               "step; pass --shard K/N");
  }
  if (found.empty() && env.has("PMIX_RANK")) {
    fail("PMIX_RANK=", env.get("PMIX_RANK"),
         " but no process count: PMIx keeps the job size in its server (PMIX_JOB_SIZE), not in "
         "the environment; expected srun, mpirun, PMI_SIZE or WORLD_SIZE beside it, found none; "
         "pass --shard K/N");
  }
  for (size_t i = 0; i < found.size(); ++i)
    for (size_t j = i + 1; j < found.size(); ++j) check_agree(found[i], found[j]);
  if (found.empty()) return Shard{0, 1, "--shard auto: no launcher found"};
  return found.front().shard;
}

Shard from_array(const Env& env) {
  LOOM_CHECK(has_pair(env, "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"),
             "--shard array: expected SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (a Slurm "
             "job array, sbatch --array=A-B[:S]), found neither");
  const int64_t id = env.get("SLURM_ARRAY_TASK_ID");
  const int64_t count = env.get("SLURM_ARRAY_TASK_COUNT");
  const int64_t min = env.has("SLURM_ARRAY_TASK_MIN") ? env.get("SLURM_ARRAY_TASK_MIN") : 0;
  const int64_t step = env.has("SLURM_ARRAY_TASK_STEP") ? env.get("SLURM_ARRAY_TASK_STEP") : 1;
  const char* const regular = "; loom shards need a regular --array=A-B[:S]";
  LOOM_CHECK(step >= 1, "SLURM_ARRAY_TASK_STEP=", step, ": expected a step >= 1");
  LOOM_CHECK(id >= min && (id - min) % step == 0, "SLURM_ARRAY_TASK_ID=", id,
             ": expected SLURM_ARRAY_TASK_MIN (", min, ") + a multiple of SLURM_ARRAY_TASK_STEP (",
             step, "), found ", id, regular);
  // Slurm sets MAX too: the ids must span it, one task per step (an irregular --array=1,3,7
  // counts 3 tasks from 1 to 7, which no step fills).
  if (env.has("SLURM_ARRAY_TASK_MAX")) {
    const int64_t max = env.get("SLURM_ARRAY_TASK_MAX");
    LOOM_CHECK(id <= max, "SLURM_ARRAY_TASK_ID=", id, ": expected at most SLURM_ARRAY_TASK_MAX (",
               max, "), found ", id, regular);
    const int64_t spanned = (max - min) / step + 1;
    LOOM_CHECK(count == spanned, "SLURM_ARRAY_TASK_COUNT=", count,
               ": expected (SLURM_ARRAY_TASK_MAX - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP "
               "+ 1 = (",
               max, " - ", min, ") / ", step, " + 1 = ", spanned, ", found ", count, regular);
  }
  return checked((id - min) / step, count, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT");
}

// The first `.shard-K-of-N` in `name` that ends it or a dot follows (merge.cpp reads inputs
// so); npos when there is none. `len` gets its length.
size_t find_tag(const std::string& name, size_t& len) {
  static const std::regex tag(R"(\.shard-\d{1,10}-of-\d{1,10}(?=\.|$))");
  std::smatch m;
  if (!std::regex_search(name, m, tag)) return std::string::npos;
  len = size_t(m.length(0));
  return size_t(m.position(0));
}

}  // namespace

Shard parse_shard(const std::string& text) {
  size_t slash = text.find('/');
  int64_t k = 0, n = 0;
  if (slash == std::string::npos || !parse_count(text.substr(0, slash), k) ||
      !parse_count(text.substr(slash + 1), n) || n < 1 || k >= n) {
    fail("--shard ", text,
         ": expected K/N with whole numbers 0 <= K < N (e.g. 0/4 ... 3/4), auto or array");
  }
  return Shard{int(k), int(n), "--shard"};
}

Shard resolve_shard(const std::string& flag, const EnvLookup& lookup) {
  Env env{lookup};
  if (flag.empty()) return Shard{0, 1, "no --shard"};
  if (flag == "auto") return from_launcher(env);
  if (flag == "array") return from_array(env);
  return parse_shard(flag);
}

std::string unrequested_shard_warning(const EnvLookup& lookup, const std::string& flag) {
  Env env{lookup};
  // SLURM_NTASKS counts the allocation's tasks even in the batch script, which is one process;
  // it still says the user meant several, so it warns although auto never reads it.
  const std::pair<const char*, int64_t> signs[] = {{"SLURM_NTASKS", 2},
                                                   {"SLURM_STEP_NUM_TASKS", 2},
                                                   {"SLURM_ARRAY_TASK_COUNT", 2},
                                                   {"OMPI_COMM_WORLD_SIZE", 2},
                                                   {"PMI_SIZE", 2},
                                                   {"PMIX_RANK", 1},
                                                   {"WORLD_SIZE", 2}};
  std::string seen;
  for (const auto& [name, at_least] : signs) {
    std::optional<int64_t> v = env.peek(name);
    if (v && *v >= at_least) seen += cat(seen.empty() ? "" : ", ", name, "=", *v);
  }
  if (seen.empty()) return "";
  if (flag == "auto")
    return cat(
        "--shard auto found no srun/mpirun/torchrun rank, so this process runs every job of "
        "the jobs file, though the environment shows several tasks (",
        seen,
        "); for Slurm array tasks pass --shard array, in a batch script start loom with srun, "
        "or pass --shard K/N");
  return cat(
      "no --shard, so this process runs every job of the jobs file, though the "
      "environment shows several tasks (",
      seen,
      "); to split one jobs file between them pass --shard auto (srun/mpirun/torchrun "
      "ranks), --shard array (Slurm array tasks) or --shard K/N");
}

std::string shard_path(const std::string& path, const Shard& shard) {
  if (shard.count <= 1 || path == "-") return path;
  std::string tag = cat(".shard-", shard.index, "-of-", shard.count);
  size_t name = path.find_last_of('/');
  name = name == std::string::npos ? 0 : name + 1;
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || dot <= name) return path + tag;  // no extension (or ".hidden")
  return path.substr(0, dot) + tag + path.substr(dot);
}

void check_untagged(const std::string& option, const std::string& path, const Shard& shard) {
  if (shard.count <= 1 || path == "-") return;
  const size_t slash = path.find_last_of('/');
  const size_t name = slash == std::string::npos ? 0 : slash + 1;  // the tag is in the file name
  std::string base = path.substr(name);
  size_t len = 0;
  const size_t at = find_tag(base, len);
  if (at == std::string::npos) return;
  const std::string found = base.substr(at, len);
  for (size_t i = at; i != std::string::npos; i = find_tag(base, len)) base.erase(i, len);
  const std::string untagged = path.substr(0, name) + base;
  fail(option, " ", path, " already has a shard tag (", found, "): pass the untagged name, ",
       untagged, "; loom adds the tag (shard ", shard.index, "/", shard.count, " writes ",
       shard_path(untagged, shard), ")");
}

}  // namespace loom
