// What `loom run` writes on stderr (issue 14 §2), in one place, so every line of a run has the
// same form whoever prints it.
//
//   text on a terminal   "loom: ..." lines, and one live progress line rewritten in place, cut
//                        to the terminal's width; other lines are printed above it.
//   text elsewhere       (a log file under Slurm) every line stamped with the UTC time and the
//                        time since the run started: in front of info and progress lines
//                        ("2026-11-25T10:00:05.123Z +0:00:05.2 loom: ..."), at the end of
//                        warning and error lines, which keep starting with "loom: warning:" /
//                        "loom: error:" so `grep '^loom: error'` still finds them.
//   json (--log-format)  one JSON object per line, whatever stderr is: {"time", "elapsed_s",
//                        "level", "message", ...fields}; progress lines carry their numbers.
//
// Lines are plain "loom: ..." text until the run starts (log_run_started, at its banner): a run
// refused before that (a bad option or output) prints one plain `loom: error:` line, like every
// other CLI error, and commands other than run never start one. --quiet drops info and
// progress lines, never warnings or errors. Thread-safe: the progress thread and the main
// thread share stderr through it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace loom {

enum class LogLevel { Info, Progress, Warning, Error };

// format: "text" or "json" (anything else is a loom::Error naming --log-format).
void log_init(const std::string& format, bool quiet);
// From here on lines take the run's form (stamped text, or json); the elapsed time counts from
// log_init.
void log_run_started();

// One line (no newline in `message`; no "loom: " prefix). `fields` go into a json line as they
// are and are ignored in text.
void log_line(LogLevel level, const std::string& message,
              const nlohmann::ordered_json& fields = nlohmann::ordered_json::object());
inline void log_info(const std::string& m) {
  log_line(LogLevel::Info, m);
}
inline void log_warning(const std::string& m) {
  log_line(LogLevel::Warning, m);
}
inline void log_error(const std::string& m) {
  log_line(LogLevel::Error, m);
}

// Text on a terminal: progress is one live line (log_live) instead of progress lines.
bool log_is_live();
// Draws `text` as the live line, cut to the terminal's width so it never wraps; "" erases it.
void log_live(const std::string& text);
// Ends the live line where it is (keeps it on screen) before the run's last lines.
void log_live_done();

// Columns of the terminal on stderr (TIOCGWINSZ); 80 when unknown.
int terminal_columns();

}  // namespace loom
