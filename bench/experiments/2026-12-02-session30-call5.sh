#!/bin/bash
# Session 30's last device call: main's whole tree with the FMA GEMV's launch bounds
# (one block an SM) under `ctest -L cuda`, then loom bench at batch 1, 2, 4 and 8 for the README.
# Build here first: make -C build -j3 && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz; cp this file .device/run.sh;
# carry .device/base.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s30c5; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8 \
  --json "$OUT/bench_b1_8.json" > "$OUT/bench_b1_8.log" 2>&1
echo "bench rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_b1_8.log" | tr -s ' '
tar czf "$FINAL/s30c5.tgz" -C "$OUT" .
