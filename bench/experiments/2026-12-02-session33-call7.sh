#!/bin/bash
# Session 33's seventh device call (~3 minutes): `ctest -L cuda` on the final tree (the register
# fit test for the qkv GEMV beside attention and the 'written' fix in its bitwise test, added
# after call 5), then batch 1 once more.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz; cp this file .device/run.sh
# carry .device/base.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s33c7; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
build/bin/cuda_test_gemv > "$OUT/test_gemv.log" 2>&1
echo "gemv rc=$? $(grep -E 'assertions' "$OUT/test_gemv.log" | tr -s ' ')"
tar czf "$FINAL/s33c7.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
  --json "$OUT/bench_b1.json" > "$OUT/bench_b1.log" 2>&1
echo "bench b1 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_b1.log" | tr -s ' '
tar czf "$FINAL/s33c7.tgz" -C "$OUT" .
