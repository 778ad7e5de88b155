#!/bin/bash
# Session 31's third device call (~5 minutes). Call 2 timed the decode kernels alone: the TMA
# kernel (pipelined, its tail chunked over a wave) beats the split kernel from batch 8 at ctx ≥
# 4,000 (b8 ctx 4,000 25.5 vs 32.7 µs, 6,000 33.4 vs 40.1), from batch 16 at ctx ≥ 2,000 (b16
# ctx 4,000 36.3 vs 48.5) and at batch 32 everywhere, but it is taken only from 256 (tile, kv
# head) pairs (batch 64). In a step the TMA kernel also needs rope_kv_write before it (the split
# kernel fuses RoPE): ~2 µs a layer more. Predicted: with the threshold at 32 pairs (batch 8),
# b8's step at ctx 4,000 ~0.1 ms faster, b16's ~0.25, b32's ~0.4; loom bench (contexts 1,746 -
# 6,336) b8 ~3-5%, b16-32 ~8-12% faster. The same binary both ways
# (bench/experiments/2026-12-02-tma-min-pairs-env.patch: LOOM_TMA_MIN_PAIRS, host code only).
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_cuda_backend" -o .device/tp.txz \
#     tp=bench/experiments/2026-12-02-tma-min-pairs-env.patch
#   cp bench/experiments/2026-12-02-session31-call3.sh .device/run.sh
# carry .device/tp.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/tp.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c3; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/tp/bin
LOOM_TMA_MIN_PAIRS=4 timeout 150 $B/cuda_test_cuda_backend > "$OUT/test_tma4.log" 2>&1
echo "backend test, TMA from 4 pairs rc=$? $(grep -E 'assertions' "$OUT/test_tma4.log" | tr -s ' ')"
for b in 8 16; do for v in 256 32; do
  LOOM_TMA_MIN_PAIRS=$v $B/cuda_bench "$OUT/step_b${b}_$v.json" --step-case $b 2000,4000,6000 > "$OUT/step_b${b}_$v.log" 2>&1
  echo "step b$b pairs>=$v rc=$?"; grep -E "without (nothing|attention) " "$OUT/step_b${b}_$v.log"
done; done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in 256 32; do
  LOOM_TMA_MIN_PAIRS=$v $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8,16,32 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "pairs>=$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s31c3.tgz" -C "$OUT" .
