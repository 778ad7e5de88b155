#include "app/progress.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "app/setup.h"

namespace loom {

Progress::Progress(int64_t total_jobs, double interval_s, bool quiet)
    : total_(total_jobs),
      interval_(interval_s),
      last_(now_seconds()),
      quiet_(quiet),
      tty_(isatty(STDERR_FILENO) == 1) {}

void Progress::update(const RunStats& st, bool force) {
  if (quiet_) return;
  const double now = now_seconds();
  const double every = tty_ ? 0.2 : interval_;
  if (!force && now - last_ < every) return;
  last_ = now;
  const int64_t done = st.jobs_read;  // read jobs are finished or in flight
  const double tps = st.wall_s > 0 ? double(st.tokens) / st.wall_s : 0;
  char eta[32] = "?";
  if (total_ >= 0 && st.samples_done > 0) {
    const double per_job = st.wall_s / double(st.samples_done + st.jobs_failed);
    const double left =
        per_job * double(total_ - std::min<int64_t>(total_, st.samples_done + st.jobs_failed));
    std::snprintf(eta, sizeof eta, "%dm%02ds", int(left) / 60, int(left) % 60);
  }
  char total[32] = "?";
  if (total_ >= 0) std::snprintf(total, sizeof total, "%lld", (long long)total_);
  std::fprintf(
      stderr,
      "%sloom: %lld/%s jobs read, %lld samples done, %lld failed, %lld frames, %.0f tokens/s, "
      "ETA %s%s",
      tty_ ? "\r\033[K" : "", (long long)done, total, (long long)st.samples_done,
      (long long)st.jobs_failed, (long long)st.frames, tps, eta, tty_ ? "" : "\n");
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (!quiet_ && tty_ && drawn_) std::fputc('\n', stderr);
}

int64_t count_job_lines(const std::string& path) {
  if (path == "-") return -1;
  std::ifstream in(path, std::ios::binary);
  if (!in) return -1;
  int64_t lines = 0;
  bool blank = true;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    for (std::streamsize i = 0; i < in.gcount(); i++) {
      const char c = buf[i];
      if (c == '\n') {
        if (!blank) lines++;
        blank = true;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        blank = false;
      }
    }
  }
  if (!blank) lines++;
  return lines;
}

}  // namespace loom
