#!/bin/bash
# Session 31's fourth device call (~7 minutes). (1) `ctest -L cuda` on main at 0f5064c (the TMA
# decode kernel from 32 (tile, kv head) pairs), then loom bench batch 1-32 for the README.
# (2) Call 3's binary (bench/experiments/2026-12-02-tma-min-pairs-env.patch): call 3 found the
# TMA kernel from 32 pairs faster at b8-32 (1.143 -> 1.035, 1.410 -> 1.190, 1.959 -> 1.448
# s/frame), more than the kernels alone predicted. Here the same for batch 1 and 4 (4 and 16
# pairs; alone the split kernel won at b1 everywhere and at b4 ctx 2,000, tied at 4,000-6,000),
# threshold 4 against 256, and FP8 KV at batch 8-32, threshold 32 against 256.
# Build here first: make -C build -j3 && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz; the tp pack as in call 3;
#   cp bench/experiments/2026-12-02-session31-call4.sh .device/run.sh
# carry .device/base.txz, .device/tp.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/tp.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c4; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8,16,32 \
  --json "$OUT/bench_main.json" > "$OUT/bench_main.log" 2>&1
echo "main bench rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_main.log" | tr -s ' '
B=.device/tp/bin
for b in 1 4; do for v in 256 4; do
  LOOM_TMA_MIN_PAIRS=$v $B/cuda_bench "$OUT/step_b${b}_$v.json" --step-case $b 2000,4000 > "$OUT/step_b${b}_$v.log" 2>&1
  echo "step b$b pairs>=$v rc=$?"; grep -E "without (nothing|attention) " "$OUT/step_b${b}_$v.log"
done; done
for r in 1 2; do for v in 256 4; do
  LOOM_TMA_MIN_PAIRS=$v $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "pairs>=$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
for v in 256 32; do
  LOOM_TMA_MIN_PAIRS=$v $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8,16,32 \
    --kv-dtype fp8 --json "$OUT/bench_fp8_${v}.json" > "$OUT/bench_fp8_${v}.log" 2>&1
  echo "fp8 pairs>=$v rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_fp8_${v}.log" | tr -s ' '
done
tar czf "$FINAL/s31c4.tgz" -C "$OUT" .
