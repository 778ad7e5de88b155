// stderr lines of a run (log.h).
#include "app/log.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "core/error.h"
#include "engine/report.h"

namespace loom {
namespace {

struct LogState {
  std::mutex mu;
  bool started = false;  // log_run_started ran: lines take the run's form
  bool inited = false;   // log_init ran: `start` is the options' parse
  bool json = false, quiet = false, tty = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::string live;  // the live line now on screen ("" when none)
};

LogState& state() {
  static LogState s;
  return s;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Info:
      return "info";
    case LogLevel::Progress:
      return "progress";
    case LogLevel::Warning:
      return "warning";
    case LogLevel::Error:
      return "error";
  }
  return "info";
}

// "+1:02:03.4": hours, minutes, seconds since the run started; fixed form, so logs sort and
// align however long the run.
std::string elapsed_text(double s) {
  const long tenths = long(s * 10);
  char buf[48];
  std::snprintf(buf, sizeof buf, "+%ld:%02ld:%02ld.%ld", tenths / 36000, tenths / 600 % 60,
                tenths / 10 % 60, tenths % 10);
  return buf;
}

void write_raw(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

void log_init(const std::string& format, bool quiet) {
  LOOM_CHECK(format == "text" || format == "json", "--log-format: expected text or json, found \"",
             format, "\"");
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.json = format == "json";
  s.quiet = quiet;
  s.tty = isatty(STDERR_FILENO) == 1;
  if (!s.inited) s.start = std::chrono::steady_clock::now();  // (run_command inits again)
  s.inited = true;
}

void log_run_started() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.started = true;
}

void log_line(LogLevel level, const std::string& message, const nlohmann::ordered_json& fields) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const bool chatter = level == LogLevel::Info || level == LogLevel::Progress;
  if (s.quiet && chatter) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
  const std::string now = format_utc(std::chrono::system_clock::now());
  std::string line;
  if (s.json) {
    nlohmann::ordered_json j;
    j["time"] = now;
    j["elapsed_s"] = double(long(elapsed * 1000)) / 1000;
    j["level"] = level_name(level);
    j["message"] = message;
    for (auto it = fields.begin(); it != fields.end(); ++it) j[it.key()] = it.value();
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    const std::string prefix = level == LogLevel::Warning ? "loom: warning: "
                               : level == LogLevel::Error ? "loom: error: "
                                                          : "loom: ";
    line = prefix + message;
    if (s.started && !s.tty) {
      const std::string stamp = now + " " + elapsed_text(elapsed);
      line = chatter ? stamp + " " + line : line + " [" + stamp + "]";
    }
  }
  line += "\n";
  if (level == LogLevel::Error && !s.live.empty()) {  // the run is over: no live line under it
    line = "\r\033[K" + line;
    s.live.clear();
  }
  if (!s.live.empty()) line = "\r\033[K" + line + s.live;  // print above the live line
  write_raw(line);
}

bool log_is_live() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.started && s.tty && !s.json && !s.quiet;
}

void log_live(const std::string& text) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  // One column short of the width: a line that fills the last column wraps on some terminals.
  const size_t width = size_t(std::max(10, terminal_columns() - 1));
  s.live = text.size() > width ? text.substr(0, width) : text;
  write_raw("\r\033[K" + s.live);
}

void log_live_done() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.live.empty()) return;
  s.live.clear();
  write_raw("\n");
}

int terminal_columns() {
  struct winsize w {};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return int(w.ws_col);
  return 80;
}

}  // namespace loom
