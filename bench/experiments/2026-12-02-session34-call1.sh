#!/bin/bash
# Prepared in session 33 for session 34 (~6 minutes); not run yet. Session 33's fold-stamped
# timeline (bench/results/2026-12-02-h200-s33-probe-timeline-b1-fold-stamps.json) put the split
# decode kernel's fold at batch 1 (ctx ~6,300, 25 partitions) at 0.64 us for the count, **2.40
# for the copies of the 25 partials (52.8 KB) into shared memory** by 128 threads' 16-byte
# cp.async, **1.25 for the merges** and 0.42 to the end. Two builds:
#  - fb (bench/experiments/2026-12-02-attention-fold-bulk-copy-env.patch): with
#    LOOM_FOLD_BULK=1 the folding block's thread 0 copies each round with one cp.async.bulk on
#    an mbarrier (a proxy fence first: the partials are other SMs' generic writes, acquired by
#    the count); LOOM_FOLD_BULK=0 is main;
#  - fu (…-fold-bulk-copy-unroll-env.patch): fb plus `#pragma unroll 4` on the merge loop (the
#    per-partition smem loads and exp2 weights of 4 partitions in flight; the merges still in
#    order), in both the split kernel's fold and the TMA kernel's warp fold.
# Same merges in the same order: same bits (the attention tests compare with the prefill
# kernel). ptxas: the bf16 split decode kernel 149 -> 151 registers (152 allocated either way:
# the qkv GEMV beside it still fits), TMA kernels unchanged, 0 spills. Predicted: copies 2.4 ->
# ~1 us, merges 1.25 -> ~0.5; b1 -1 to -3%, b2 alike, b8 (TMA warp fold, unroll only) -0 to -1%.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend cuda_test_gemv" \
#     -o .device/fb.txz fb=bench/experiments/2026-12-02-attention-fold-bulk-copy-env.patch \
#     fu=bench/experiments/2026-12-02-attention-fold-bulk-copy-unroll-env.patch
#   cp this file .device/run.sh; carry .device/fb.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/fb.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s34c1; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for t in cuda_test_attention cuda_test_cuda_backend cuda_test_gemv; do
  LOOM_FOLD_BULK=1 timeout 150 .device/fu/bin/$t > "$OUT/test_fu_$t.log" 2>&1
  echo "fu bulk $t rc=$? $(grep -E 'assertions' "$OUT/test_fu_$t.log" | tr -s ' ')"
done
LOOM_FOLD_BULK=1 timeout 150 .device/fb/bin/cuda_test_attention > "$OUT/test_fb_attention.log" 2>&1
echo "fb bulk attention rc=$? $(grep -E 'assertions' "$OUT/test_fb_attention.log" | tr -s ' ')"
timeout 150 .device/fu/bin/cuda_test_attention > "$OUT/test_fu0_attention.log" 2>&1
echo "fu attention rc=$? $(grep -E 'assertions' "$OUT/test_fu0_attention.log" | tr -s ' ')"
tar czf "$FINAL/s34c1.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for vv in fb:0 fb:1 fu:0 fu:1; do
  v=${vv%:*}; e=${vv#*:}
  LOOM_FOLD_BULK=$e .device/$v/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,2,8 --json "$OUT/bench_${v}${e}_$r.json" > "$OUT/bench_${v}${e}_$r.log" 2>&1
  echo "$v bulk $e r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}${e}_$r.log" | tr -s ' '
done; tar czf "$FINAL/s34c1.tgz" -C "$OUT" .; done
