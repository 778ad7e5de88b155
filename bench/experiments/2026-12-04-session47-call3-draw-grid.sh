#!/bin/bash
# Session 47, call 3: the persistent draw's grid (bench/experiments/2026-12-04-persistent-draw-
# not-kept.patch, built with an experiment-only knob not in the patch: LOOM_DRAW_MULT scaled the
# grid, per_sm x SMs x mult capped at the items, and the first launch printed it; carry
# .device/mult.tgz, that build's cuda_bench). Each mult twice, the 256-row sigma-1 cases.
python3 -c "import tarfile; tarfile.open('.device/mult.tgz').extractall()"
. scripts/device_env.sh
for m in 1 2 4 1000 1 2 4 1000; do
  LOOM_DRAW_MULT=$m build/bin/cuda_bench /tmp/m$m.json --only sampling > /tmp/m$m.log 2>&1
  echo "mult $m: $(grep 'draw: per_sm' /tmp/m$m.log | head -2 | tr '\n' ' ')"
  grep -E "sample (greedy|temperature 0.9|top-p 0.9 |top-k 50 ).*(256 rows)" /tmp/m$m.log | grep "sigma 1" | sed 's/  */ /g'
done
