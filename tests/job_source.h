// Engine::run's job source over a list of jobs, for the engine tests.
#pragma once

#include <vector>

#include "engine/engine.h"

namespace loom::test {

// The jobs in order, each accepted. `jobs` must outlive the run.
inline JobSource source_of(const std::vector<Job>& jobs) {
  return [&jobs, next = size_t(0)](Job& j, JobError&, bool& ok) mutable {
    if (next == jobs.size()) return false;
    j = jobs[next++];
    ok = true;
    return true;
  };
}

}  // namespace loom::test
