#!/bin/bash
# Prepared in session 33 for session 34 (~3 minutes); not run yet. Session 33's fold-stamped
# timeline (bench/results/2026-12-02-h200-s33-probe-timeline-b1-fold-stamps.json) put the split
# decode kernel's fold at batch 1 (ctx ~6,300, 25 partitions) at 0.64 us for the count, **2.40
# for the copies of the 25 partials (52.8 KB) into shared memory** by 128 threads' 16-byte
# cp.async, 1.25 for the merges and 0.42 to the end. The patch
# (bench/experiments/2026-12-02-attention-fold-bulk-copy-env.patch, LOOM_FOLD_BULK=1) has the
# folding block's thread 0 copy each round with one cp.async.bulk on an mbarrier (a proxy fence
# first: the partials are other SMs' generic writes, acquired by the count), the same merges in
# the same order (same bits). ptxas: the bf16 decode kernel 149 -> 151 registers (still 152
# allocated: the qkv GEMV beside it still fits), 0 spills. Predicted: copies 2.4 -> ~1 us, b1
# -1 to -2%, b2 alike.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend cuda_test_gemv" \
#     -o .device/fb.txz fb=bench/experiments/2026-12-02-attention-fold-bulk-copy-env.patch
#   cp this file .device/run.sh; carry .device/fb.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/fb.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s34c1; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/fb/bin
for t in cuda_test_attention cuda_test_cuda_backend cuda_test_gemv; do
  LOOM_FOLD_BULK=1 timeout 150 $B/$t > "$OUT/test_fb_$t.log" 2>&1
  echo "fold bulk $t rc=$? $(grep -E 'assertions' "$OUT/test_fb_$t.log" | tr -s ' ')"
done
tar czf "$FINAL/s34c1.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for e in 0 1; do
  LOOM_FOLD_BULK=$e $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2 \
    --json "$OUT/bench_fb${e}_$r.json" > "$OUT/bench_fb${e}_$r.log" 2>&1
  echo "fold bulk $e r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_fb${e}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s34c1.tgz" -C "$OUT" .
