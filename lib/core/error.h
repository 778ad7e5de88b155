// Errors in tiers (style.md §10). Library code throws loom::Error with enough context
// (file, tensor, job line) that the CLI can print it as one line. LOOM_CHECK is for
// conditions on input and state that must hold in Release builds too; never use assert.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace loom {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Concatenates anything streamable: cat("expected ", n, " rows, found ", m).
template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(cat(std::forward<Args>(args)...));
}

}  // namespace loom

#define LOOM_CHECK(cond, ...)               \
  do {                                      \
    if (!(cond)) ::loom::fail(__VA_ARGS__); \
  } while (0)
