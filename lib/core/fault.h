// Deterministic fault points for the crash tests (issue 11 §7). With
// LOOM_TEST_FAULT=<point>:<n> in the environment, the n-th time the process passes
// fault_point("<point>") it kills itself with SIGKILL — as a power cut or the OOM killer
// would, with no destructor, flush or handler run; with <point>:<n>:term it sends itself
// SIGTERM instead (scancel's signal, at a known moment), with :term2 twice in a row. Without
// the variable it costs one load.
// Points (in the order a committed dataset file passes them):
//   data-file    the data file is renamed into place and its folder synced
//   checksums    its SHA256SUMS line is written and synced
//   manifest     its manifest lines are written and synced
//   record       one results record is written and flushed
//   replacing    --overwrite marked the side file and dataset.json "replacing" (before removing)
// and, before any of them, in `loom run`:
//   started      the outputs are checked and marked "running" (before the model's load)
//   loaded       the model is loaded
// and in every command:
//   atomic-write a file of write_file_atomic is written to its temporary name (not renamed)
#pragma once

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace loom {

inline void fault_point(const char* point) {
  static const char* spec = std::getenv("LOOM_TEST_FAULT");
  if (!spec || !*spec) return;
  const size_t n = std::strcspn(spec, ":");
  static long remaining = spec[n] == ':' ? std::strtol(spec + n + 1, nullptr, 10) : 1;
  static const int sig = std::strstr(spec + n, ":term") != nullptr ? SIGTERM : SIGKILL;
  static const bool twice = std::strstr(spec + n, ":term2") != nullptr;
  if (std::strlen(point) != n || std::strncmp(spec, point, n) != 0) return;
  if (--remaining != 0) return;
  ::raise(sig);
  if (twice) ::raise(sig);
}

}  // namespace loom
