#!/bin/bash
# Session 31's fourth device call (~5 minutes), call 3's binary
# (bench/experiments/2026-12-02-tma-min-pairs-env.patch). Call 3: the TMA decode kernel from 32
# pairs made loom bench b8 1.143 -> 1.035, b16 1.410 -> 1.190, b32 1.959 -> 1.448 s/frame (bf16
# KV), more than the kernels alone predicted. Here: (1) the same for batch 1, 2 and 4 (4, 8, 16
# pairs; alone the split kernel won at b1 everywhere and at b4 ctx 2,000, tied at 4,000-6,000),
# threshold 4 against 256; (2) FP8 KV at batch 8-32, threshold 32 against 256 (not timed alone).
# Build: as call 3 (.device/tp.txz); cp bench/experiments/2026-12-02-session31-call4.sh .device/run.sh
python3 -c "import tarfile; tarfile.open('.device/tp.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c4; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/tp/bin
for b in 1 4; do for v in 256 4; do
  LOOM_TMA_MIN_PAIRS=$v $B/cuda_bench "$OUT/step_b${b}_$v.json" --step-case $b 2000,4000 > "$OUT/step_b${b}_$v.log" 2>&1
  echo "step b$b pairs>=$v rc=$?"; grep -E "without (nothing|attention) " "$OUT/step_b${b}_$v.log"
done; done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
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
