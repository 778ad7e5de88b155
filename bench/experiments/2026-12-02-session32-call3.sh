#!/bin/bash
# Session 32's third device call (~4 minutes): `ctest -L cuda` on the tree with the fused GEMV
# schedule at 1-2 slots only (3-4 on the GEMM path), loom bench at batch 1-8, then where batch
# 1's and batch 4's steps go (cuda_bench --step-case) for the next design.
# Build here first: make -C build -j3 && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz; cp this file .device/run.sh
# carry .device/base.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s32c3; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s32c3.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,3,4,8 \
  --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench.log" | tr -s ' '
tar czf "$FINAL/s32c3.tgz" -C "$OUT" .
for b in 1 4; do
  timeout 100 build/bin/cuda_bench "$OUT/step_b$b.json" --step-case $b 600,2000 > "$OUT/step_b$b.log" 2>&1
  echo "step case b$b rc=$?"
done
tar czf "$FINAL/s32c3.tgz" -C "$OUT" .
