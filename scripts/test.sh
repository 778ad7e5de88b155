#!/usr/bin/env bash
# Builds and runs the whole test suite on a fresh machine: installs the C++ dependencies and
# Python with torch + transformers 4.39.3 (for the live HF reference check), builds with CUDA
# where nvcc is found (the CUDA tests then run where a GPU is, and report Skipped where not),
# and runs ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" --python
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DLOOM_TESTS=ON \
  -DLOOM_PYTHON="$root/build/pyenv/bin/python" >/dev/null
cmake --build "$root/build" -j"$(nproc)"
cd "$root/build"
ctest --output-on-failure "$@"
