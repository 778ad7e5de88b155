#!/bin/bash
# Session 33's eighth device call (~4 minutes): call 4's co-residency at two sequences. The
# tensor-core GEMV (2-16 rows) holds 118-128 registers x 512 threads; at 96 (spilling 8-16
# bytes) beside a split decode kernel held to 118 registers (__launch_bounds__(128, 4), 0
# spills) a block of each fits an SM (49,152 + 15,360). mb = that build
# (bench/experiments/2026-12-02-gemv-mma-beside-attention-env.patch), LOOM_BESIDE_MMA=1 puts the
# 2-slot qkv GEMV on the lean kernel; 0 leaves it (the attention kernel at 118 either way).
# Predicted: batch 2 -1 to -2% (batch 1's gain was -2.3%); batch 1 within +0.3% of main.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_test_cuda_backend cuda_test_attention" -o .device/mb.txz \
#     main=main mb=bench/experiments/2026-12-02-gemv-mma-beside-attention-env.patch
#   cp this file .device/run.sh; carry .device/mb.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/mb.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s33c8; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
LOOM_BESIDE_MMA=1 timeout 100 .device/mb/bin/cuda_test_cuda_backend > "$OUT/test_mb_backend.log" 2>&1
echo "mb backend rc=$? $(grep -E 'assertions' "$OUT/test_mb_backend.log" | tr -s ' ')"
timeout 100 .device/mb/bin/cuda_test_attention > "$OUT/test_mb_attention.log" 2>&1
echo "mb attention rc=$? $(grep -E 'assertions' "$OUT/test_mb_attention.log" | tr -s ' ')"
tar czf "$FINAL/s33c8.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for vv in main:0 mb:0 mb:1; do
  v=${vv%:*}; e=${vv#*:}
  LOOM_BESIDE_MMA=$e .device/$v/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,2 --json "$OUT/bench_${v}_${e}_$r.json" > "$OUT/bench_${v}_${e}_$r.log" 2>&1
  echo "$v $e r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_${e}_$r.log" | tr -s ' '
done; tar czf "$FINAL/s33c8.tgz" -C "$OUT" .; done
