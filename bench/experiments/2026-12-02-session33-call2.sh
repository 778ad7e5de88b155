#!/bin/bash
# Prepared in session 32 for session 33 (~4 minutes); not run yet. The TMA decode kernel
# (batch 4-32 with a bf16 cache, 16-32 with FP8) folds a pair's partitions in its last warp by
# combine_partitions: 2 (row, 8 dims) items a lane, each read 8 partitions a round, one L2
# round trip a round (b8 ctx 4,000: 16 partitions, 4 rounds in turn). The patch
# (bench/experiments/2026-12-02-tma-decode-staged-warp-fold.patch) generalises session 32's
# staged fold to a warp (kItems 2, __syncwarp) and has the last warp copy the partials into its
# own ring (free once its tiles are consumed: 15 partitions a round with bf16's 2 stages), then
# the same merges in the same order: the same bits (cuda_test_attention compares every TMA
# config with the prefill kernel bitwise). ptxas: the TMA kernels 167-244 -> 240-254 registers,
# 0 spills (blocks of 2-4 warps: 2 blocks an SM still fit). Predicted: b8 -1 to -2%, b16-32
# -1 to -3% (attention is 28-33% of those steps).
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend" \
#     -o .device/tf.txz main=main tf=bench/experiments/2026-12-02-tma-decode-staged-warp-fold.patch
#   cp bench/experiments/2026-12-02-session33-call2.sh .device/run.sh
# carry .device/tf.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/tf.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s33c2; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for t in cuda_test_attention cuda_test_cuda_backend; do
  timeout 150 .device/tf/bin/$t > "$OUT/test_tf_$t.log" 2>&1
  echo "$t rc=$? $(grep -E 'assertions' "$OUT/test_tf_$t.log" | tr -s ' ')"
done
tar czf "$FINAL/s33c2.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in main tf; do
  .device/$v/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 4,8,16,32 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s33c2.tgz" -C "$OUT" .
