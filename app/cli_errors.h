// CLI11's parse errors as loom's one line (issue 14, "Bad input"): `loom: error:`, the option
// and the value as the user gave them, what was expected, and a "did you mean" for a misspelt
// command or option. CLI11's own wording is the fallback for errors loom's options cannot
// raise, still on one line.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace loom {

// The line, newline included, for an error thrown by app.parse(argc, argv) on the root `app`
// (its failure_message).
std::string cli_error_line(const CLI::App& app, const CLI::Error& e, int argc,
                           const char* const* argv);

// `loom` with no command: usage and one line per command.
std::string cli_usage(const CLI::App& app);

}  // namespace loom
