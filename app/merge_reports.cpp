// `loom merge --reports`: merges the run reports of a sharded run (lib/engine/report_merge.h)
// and writes the result whole or not at all: a temporary file beside --out, fsync, rename.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "app/commands.h"
#include "core/error.h"
#include "engine/report_merge.h"
#include "io/merge.h"
#include "io/outputs.h"

namespace loom {
namespace {

void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = cat(path, ".tmp-", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    fail("cannot write the merged report to ", path, ": ", std::strerror(errno),
         "; check the directory exists and is writable");
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  // Durable before it gets its name: a crash never leaves a half report under --out.
  const bool ok = done == text.size() && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : err;
    ::unlink(tmp.c_str());
    fail("cannot write the merged report to ", path, ": ", std::strerror(e));
  }
}

}  // namespace

int merge_reports_command(const std::vector<std::string>& reports, const std::string& out,
                          bool overwrite) {
  for (const std::string& r : reports) {
    LOOM_CHECK(!same_path(r, out), "merge: --out ", out, " is also an input (", r,
               "); write the merged report somewhere else");
  }
  check_file_output("merge: ", "--out", out, overwrite);
  const nlohmann::json merged = merge_reports(reports);
  const std::string text = merged.dump(2) + "\n";
  if (out == "-") {
    LOOM_CHECK(
        std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0,
        "cannot write the merged report to stdout: ", std::strerror(errno));
  } else {
    write_file(out, text);
  }
  const nlohmann::json& gen = merged["generated"];
  std::fprintf(stderr,
               "loom: merged %zu reports: %lld tokens, %lld frames in %.2f s (%.1f tokens/s; "
               "%.1f summed over shards) into %s\n",
               reports.size(), (long long)gen["tokens"].get<int64_t>(),
               (long long)gen["frames"].get<int64_t>(), merged["time_s"]["run"].get<double>(),
               gen["tokens_per_s"].get<double>(),
               gen["sum_of_shard_rates"]["tokens_per_s"].get<double>(),
               out == "-" ? "stdout" : out.c_str());
  return kExitOk;
}

}  // namespace loom
