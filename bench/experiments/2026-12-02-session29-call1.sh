#!/bin/bash
# Session 29's first device call, prepared in session 28 (bench/NOTES-cuda.md, "Ready for
# session 29"): main as a whole tree on the GPU (7fd1595's kernels were each measured in session
# 28, the tree was not) — ctest -L cuda, then loom bench at batch 1-4 and 8 for the README.
# Build here first:
#   make -C build -j3 && rm -f build/bin/cuda_test_shared_plan && scripts/pack_device.sh tests build
#   cp bench/experiments/2026-12-02-session29-call1.sh .device/run.sh
# then carry .device/carry.txz and .device/run.sh and run `bash .device/run.sh` (~4 minutes).
python3 -c "import tarfile; tarfile.open('.device/carry.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s29c1; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,3,4,8 \
  --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -E '^ +(1|2|3|4|8) ' "$OUT/bench.log" | tr -s ' '
tar czf "$FINAL/s29c1.tgz" -C "$OUT" .
