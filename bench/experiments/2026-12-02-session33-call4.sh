#!/bin/bash
# Session 33's fourth device call (~7 minutes): the batch-1 GEMVs beside attention, call 3's
# best (lean qkv and o at 88 registers, no carveout: b1 0.7293 -> 0.7200 s/frame in both
# rounds) split into qkv / o, and at 96 registers with the decode kernel held to 118
# (__launch_bounds__(128, 4), 0 spills) so the lean GEMV keeps more registers
# (bench/experiments/2026-12-02-gemv-beside-attention-env-v2{,-96}.patch; LOOM_BESIDE 0 main,
# 1 qkv and o, 2 qkv only, 3 o only). Predicted: both halves help (qkv: attention's tiles in
# flight during qkv; o: o's rows in flight during attention); 96 at least as fast as 88.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_test_cuda_backend cuda_test_attention" -o .device/b2.txz \
#     b88=bench/experiments/2026-12-02-gemv-beside-attention-env-v2.patch \
#     b96=bench/experiments/2026-12-02-gemv-beside-attention-env-v2-96.patch
#   scripts/variant_build.sh -t "loom cuda_test_gemv cuda_test_cuda_backend" -o .device/cl.txz cl=main
#   (main = the change as committed, qkv and o at 88: the same as LOOM_BESIDE=1 of b88)
#   cp this file .device/run.sh; carry .device/b2.txz, .device/cl.txz and .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('.device/b2.txz', '.device/cl.txz')]"
FINAL=$OUT; OUT=/tmp/s33c4; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for t in cuda_test_gemv cuda_test_cuda_backend; do
  timeout 150 .device/cl/bin/$t > "$OUT/test_cl_$t.log" 2>&1
  echo "cl $t rc=$? $(grep -E 'assertions' "$OUT/test_cl_$t.log" | tr -s ' ')"
done
LOOM_BESIDE=1 timeout 150 .device/b96/bin/cuda_test_cuda_backend > "$OUT/test_b96_backend.log" 2>&1
echo "b96 backend rc=$? $(grep -E 'assertions' "$OUT/test_b96_backend.log" | tr -s ' ')"
timeout 150 .device/b96/bin/cuda_test_attention > "$OUT/test_b96_attention.log" 2>&1
echo "b96 attention rc=$? $(grep -E 'assertions' "$OUT/test_b96_attention.log" | tr -s ' ')"
tar czf "$FINAL/s33c4.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for vv in b88:0 b88:1 b88:2 b88:3 b96:0 b96:1 cl:0; do
  v=${vv%:*}; e=${vv#*:}
  LOOM_BESIDE=$e .device/$v/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1 --json "$OUT/bench_${v}_${e}_$r.json" > "$OUT/bench_${v}_${e}_$r.log" 2>&1
  echo "$v beside $e r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_${e}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s33c4.tgz" -C "$OUT" .
for v in b88 b96; do
  .device/$v/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 2,3 \
    --json "$OUT/bench_${v}_b23.json" > "$OUT/bench_${v}_b23.log" 2>&1
  echo "$v b2-3 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_b23.log" | tr -s ' '
done
tar czf "$FINAL/s33c4.tgz" -C "$OUT" .
