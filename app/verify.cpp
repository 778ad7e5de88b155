// `loom verify DIR`: checks a token dataset folder without changing it (io/dataset.h
// verify_dataset) and says what it found: one summary line, then each problem. Exit 0 when the
// folder is whole and every byte is as loom wrote it, 1 when a problem was found, 2 when DIR
// is no dataset folder at all.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/commands.h"
#include "core/error.h"
#include "io/dataset.h"

namespace loom {

int verify_command(const VerifyArgs& a) {
  const int threads =
      a.threads > 0 ? a.threads : std::clamp(int(std::thread::hardware_concurrency()), 1, 8);
  const auto t0 = std::chrono::steady_clock::now();
  const DatasetVerify v = verify_dataset(a.dir, threads);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.json) {
    nlohmann::ordered_json j;
    j["dir"] = a.dir;
    j["ok"] = v.problems.empty();
    j["indexes"] = v.indexes;
    j["files"] = v.files;
    j["samples"] = v.samples;
    j["rows"] = v.rows;
    j["bytes"] = v.bytes;
    j["checksums_matched"] = v.checksummed;
    j["seconds"] = secs;
    j["problems"] = v.problems;
    j["notes"] = v.notes;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::string indexes;
    for (const std::string& i : v.indexes) indexes += (indexes.empty() ? "" : ", ") + i;
    std::printf(
        "%s: %lld files, %lld samples, %lld rows, %.1f MiB read in %.1f s; "
        "%lld of %lld SHA-256 match; index %s\n",
        a.dir.c_str(), (long long)v.files, (long long)v.samples, (long long)v.rows,
        double(v.bytes) / (1 << 20), secs, (long long)v.checksummed, (long long)v.files,
        indexes.empty() ? "(none readable)" : indexes.c_str());
    for (const std::string& n : v.notes) std::printf("note: %s\n", n.c_str());
    for (const std::string& p : v.problems) std::printf("problem: %s\n", p.c_str());
    std::printf("%s\n", v.problems.empty()
                            ? "ok: the dataset is whole and unchanged"
                            : cat(v.problems.size(), " problem", v.problems.size() > 1 ? "s" : "",
                                  ": the dataset is not as loom wrote it")
                                  .c_str());
  }
  return v.problems.empty() ? kExitOk : kExitJobsFailed;
}

}  // namespace loom
