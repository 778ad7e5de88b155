// loom: offline batch inference for autoregressive video-token world models.
// Parsing and wiring only: the options are in app/cli_options.cpp, the error lines in
// app/cli_errors.cpp, the commands in app/*.cpp. Every failure before a command runs is one
// `loom: error:` line on stderr and exit 2.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

#include "app/cli_errors.h"
#include "app/cli_options.h"
#include "app/commands.h"
#include "app/log.h"
#include "core/error.h"
#include "io/outputs.h"
#include "io/provenance.h"

using namespace loom;

namespace {

// Output that a full disk or a closed pipe refused fails at the last flush too: never exit 0.
int flushed(int code) {
  // (A command that failed has said why, a failed write to stdout included.)
  if ((std::fflush(stdout) == 0 && !std::ferror(stdout)) || code == kExitFatal) return code;
  std::fprintf(stderr, "loom: error: cannot write to stdout: %s\n", std::strerror(errno));
  return kExitFatal;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe on stdout or stderr is an error on write (EPIPE), not a silent death.
  std::signal(SIGPIPE, SIG_IGN);
  on_stop_signals(die_by_signal);  // (loom run puts a clean stop over it)
  CLI::App app{"loom: fast offline batch inference for video-token world models", "loom"};
  app.set_version_flag("--version", version_text());
  CliArgs args;
  const CliCommands cmd = add_commands(app, args, true);
  app.failure_message([argc, argv](const CLI::App* a, const CLI::Error& e) {
    return cli_error_line(*a, e, argc, argv);
  });
  // Like git and cargo: no command is a usage error, answered with the list of commands.
  if (argc == 1) {
    std::fputs(cli_usage(app).c_str(), stderr);
    return kExitFatal;
  }

  // CLI11 answers --version as soon as it parses it, before it looks at the other arguments:
  // `loom --version --foo` printed the version and exited 0.
  for (int i = 1; i < argc && argv[i][0] == '-'; i++) {
    if (std::strcmp(argv[i], "--version") != 0 || argc == 2) continue;
    std::fprintf(stderr,
                 "loom: error: --version takes no other arguments; found %s (expected "
                 "`loom --version` alone)\n",
                 argv[i == 1 ? 2 : 1]);
    return kExitFatal;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // --help and --version print here: to stdout, checked
    return code == 0 ? flushed(kExitOk) : kExitFatal;
  }
  // A run logs in its --log-format from here on: its warnings and refusals too.
  if (*cmd.run) {
    try {
      log_init(args.run.log_format, args.run.quiet);
    } catch (const Error& e) {
      std::fprintf(stderr, "loom: error: %s\n", e.what());
      return kExitFatal;
    }
  }
  try {
    finish_args(cmd, args, argc, argv);
    if (*cmd.run) return flushed(run_command(args.run));
    if (*cmd.inspect) return flushed(inspect_command(args.inspect));
    if (*cmd.merge) return flushed(merge_command(args.merge));
    if (*cmd.bench) return flushed(bench_command(args.bench));
    if (*cmd.calibrate) return flushed(calibrate_command(args.calibrate));
    if (*cmd.verify) return flushed(verify_command(args.verify));
  } catch (const Error& e) {
    log_error(e.what());
    return kExitFatal;
  } catch (const std::bad_alloc& e) {
    std::fprintf(stderr, "loom: error: %s\n", error_text(e).c_str());
    return kExitFatal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom: internal error: %s\n", e.what());
    return kExitFatal;
  }
  return kExitFatal;
}
