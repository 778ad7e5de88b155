#!/usr/bin/env bash
# The main job on a fresh machine: install, build, and run loom on the bundled tiny Terra-style
# model with its sample jobs. Prints where the results and the report went.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DLOOM_TESTS=OFF >/dev/null
# Everything a build without tests makes: loom, its tables and, with nvcc, the CUDA module.
cmake --build "$root/build" -j"$(nproc)" >/dev/null
mkdir -p "$root/out"
# --overwrite: a second demo replaces the first one's outputs (a run of your own refuses to).
"$root/build/bin/loom" run --overwrite --model "$root/testdata/tiny_v1" --jobs "$root/testdata/jobs/tiny_v1.jsonl" \
  --out "$root/out/tiny_v1.results.jsonl" --report "$root/out/tiny_v1.report.json" "$@"
