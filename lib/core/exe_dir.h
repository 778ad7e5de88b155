// The folder of the running binary. loom finds its data (mapping tables) and its CUDA module
// relative to it, never through a path compiled in, so that a build folder or an install
// prefix can be moved or copied to another machine as a whole.
#pragma once

#include <unistd.h>

#include <string>

namespace loom {

// "" when /proc/self/exe cannot be read.
inline std::string exe_dir() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  const std::string p(exe, size_t(n));
  return p.substr(0, p.find_last_of('/'));
}

// The folder above exe_dir(): the install prefix when loom runs from <prefix>/bin.
inline std::string exe_prefix() {
  const std::string dir = exe_dir();
  return dir.substr(0, dir.find_last_of('/'));
}

}  // namespace loom
