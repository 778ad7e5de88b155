// loom's command line on CLI11 2.1.2: every subcommand's options in one place, with defaults
// shown in --help (always_capture_default), validators that say in words what was expected
// (cli_errors.cpp puts the option and value in front), the names vLLM users type as aliases,
// and a LOOM_<OPTION> environment variable for every `run` option. The command line wins over
// the environment; a LOOM_ value only fills an option the command line leaves out.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "app/commands.h"

namespace loom {

// What one parse fills: the arguments of whichever subcommand was given.
struct CliArgs {
  RunArgs run;
  InspectArgs inspect;
  MergeArgs merge;
  BenchArgs bench;
  CalibrateArgs calibrate;
  VerifyArgs verify;
  std::string inspect_dir;  // deprecated positional `inspect DIR` (= --model DIR)
  int bench_jobs = 0;       // deprecated `bench --jobs N` (= --num-jobs N)
};

struct CliCommands {
  CLI::App *run = nullptr, *inspect = nullptr, *merge = nullptr, *bench = nullptr,
           *calibrate = nullptr, *verify = nullptr;
};

// Adds the subcommands and their options to `app`, bound to `args`. with_env: run's options
// read LOOM_<OPTION> (--max-seqs: LOOM_MAX_SEQS) when the command line gives them no value.
CliCommands add_commands(CLI::App& app, CliArgs& args, bool with_env);

// "--max-seqs" → "LOOM_MAX_SEQS".
std::string env_name(const std::string& long_option);

// The options (their first long name, "--max-seqs") that argv itself gives the subcommand it
// names: a parse of argv without the environment. Tells LOOM_ values from typed ones.
std::vector<std::string> options_on_command_line(int argc, const char* const* argv);

// After a successful parse: resolves the deprecated forms (a `loom: warning:` line each),
// refuses options that contradict each other or would be ignored (loom::Error: one CLI line;
// an ignored LOOM_ variable only warns), and fills run.from_env.
void finish_args(const CliCommands& cmd, CliArgs& args, int argc, const char* const* argv);

}  // namespace loom
