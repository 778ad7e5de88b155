#!/bin/bash
# Session 31's last device call (~5 minutes): `ctest -L cuda` on main at 976a2b4 (the TMA decode
# kernel from 16 (tile, kv head) pairs with bf16 KV and from 64 with FP8), then loom bench at
# batch 1-16 (bf16) and 8-16 (FP8) for the README.
# Build here first: make -C build -j3 && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   cp bench/experiments/2026-12-02-session31-call5.sh .device/run.sh
# carry .device/base.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c5; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8,16 \
  --json "$OUT/bench_bf16.json" > "$OUT/bench_bf16.log" 2>&1
echo "bf16 bench rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_bf16.log" | tr -s ' '
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8,16 \
  --kv-dtype fp8 --json "$OUT/bench_fp8.json" > "$OUT/bench_fp8.log" 2>&1
echo "fp8 bench rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_fp8.log" | tr -s ' '
tar czf "$FINAL/s31c5.tgz" -C "$OUT" .
