// Shard selection (shard.h).
#include "io/shard.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "core/error.h"

namespace loom {
namespace {

// A whole decimal number in [0, INT32_MAX]; false for anything else.
bool parse_count(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 10) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > std::numeric_limits<int32_t>::max()) return false;
  out = v;
  return true;
}

struct Env {
  const EnvLookup& lookup;
  const char* raw(const char* name) const { return lookup ? lookup(name) : std::getenv(name); }
  bool has(const char* name) const {
    const char* v = raw(name);
    return v && *v;
  }
  int64_t get(const char* name) const {
    const char* v = raw(name);
    int64_t out = 0;
    if (!parse_count(v ? v : "", out)) {
      fail("environment variable ", name, "=", v ? v : "",
           ": expected a non-negative integer, found something else; unset it or fix the "
           "launcher");
    }
    return out;
  }
};

Shard checked(int64_t k, int64_t n, std::string source) {
  if (!(n >= 1 && k >= 0 && k < n)) {
    fail("shard from ", source, ": expected 0 <= K < N, found K = ", k, ", N = ", n);
  }
  return Shard{int(k), int(n), std::move(source)};
}

}  // namespace

Shard parse_shard(const std::string& text) {
  size_t slash = text.find('/');
  int64_t k = 0, n = 0;
  if (slash == std::string::npos || !parse_count(text.substr(0, slash), k) ||
      !parse_count(text.substr(slash + 1), n) || n < 1 || k >= n) {
    fail("--shard ", text, ": expected K/N with whole numbers 0 <= K < N (e.g. 0/4 ... 3/4)");
  }
  return Shard{int(k), int(n), "--shard"};
}

Shard shard_from_env(const EnvLookup& lookup) {
  Env env{lookup};
  // Slurm: srun tasks and job arrays, combined when both are present.
  int64_t tasks = 1, proc = 0, arrays = 1, array_index = 0;
  std::string source;
  if (env.has("SLURM_NTASKS")) {
    tasks = env.get("SLURM_NTASKS");
    proc = env.has("SLURM_PROCID") ? env.get("SLURM_PROCID") : 0;
    if (tasks > 1) {
      LOOM_CHECK(env.has("SLURM_PROCID"), "SLURM_NTASKS=", tasks,
                 " but SLURM_PROCID is not set: expected both (run loom under srun), found one");
      checked(proc, tasks, "SLURM_PROCID/SLURM_NTASKS");
      source = "SLURM_PROCID/SLURM_NTASKS";
    }
  }
  if (env.has("SLURM_ARRAY_TASK_COUNT") && env.has("SLURM_ARRAY_TASK_ID")) {
    arrays = env.get("SLURM_ARRAY_TASK_COUNT");
    if (arrays > 1) {
      int64_t id = env.get("SLURM_ARRAY_TASK_ID");
      int64_t min = env.has("SLURM_ARRAY_TASK_MIN") ? env.get("SLURM_ARRAY_TASK_MIN") : 0;
      int64_t step = env.has("SLURM_ARRAY_TASK_STEP") ? env.get("SLURM_ARRAY_TASK_STEP") : 1;
      LOOM_CHECK(id >= min && step >= 1 && (id - min) % step == 0, "SLURM_ARRAY_TASK_ID=", id,
                 ": expected SLURM_ARRAY_TASK_MIN (", min,
                 ") + a multiple of "
                 "SLURM_ARRAY_TASK_STEP (",
                 step, "), found ", id, "; loom shards need a regular --array=A-B[:S]");
      array_index = (id - min) / step;
      checked(array_index, arrays, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT");
      source = source.empty() ? "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"
                              : "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT x " + source;
    }
  }
  if (tasks > 1 || arrays > 1) {
    if (tasks <= 1) proc = 0, tasks = 1;
    return checked(array_index * tasks + proc, arrays * tasks, source);
  }
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"RANK", "WORLD_SIZE"}};
  for (auto& [rank, size] : pairs) {
    if (!env.has(size)) continue;
    int64_t n = env.get(size);
    if (n <= 1) continue;
    LOOM_CHECK(env.has(rank), size, "=", n, " but ", rank, " is not set: expected both, found one");
    return checked(env.get(rank), n, std::string(rank) + "/" + size);
  }
  return Shard{0, 1, "none"};
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

}  // namespace loom
