#!/bin/bash
# Session 33's fifth device call (~5 minutes): `ctest -L cuda` on main with the qkv GEMV beside
# decode attention, then loom bench batch 1-8 for the README (batch 1 twice).
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz; cp this file .device/run.sh
# carry .device/base.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s33c5; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s33c5.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8 \
  --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench.log" | tr -s ' '
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
  --json "$OUT/bench_b1_2.json" > "$OUT/bench_b1_2.log" 2>&1
echo "bench b1 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_b1_2.log" | tr -s ' '
tar czf "$FINAL/s33c5.tgz" -C "$OUT" .
