#!/bin/bash
# Session 30's sixth device call: the one-row GEMV issues its second batch of weights before the
# PDL wait too (bench/experiments/2026-12-02-gemv-one-row-second-batch-before-wait.patch; 2-16
# rows unchanged). Measured in session 26 at 97-98 registers: issued before the staging it held
# the staging's loads up (5% slower a frame); with the launch bounds of call 4 the kernels hold
# 104-128 registers (0 spills), so it is measured again. Chain, batch-1 step, loom bench b1 in
# three rounds alternated with main, the GEMV and backend tests.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_gemv cuda_test_cuda_backend" \
#     -o .device/e2.txz e2=bench/experiments/2026-12-02-gemv-one-row-second-batch-before-wait.patch
#   cp bench/experiments/2026-12-02-session30-call6.sh .device/run.sh
# carry .device/base.txz (main's tests pack), .device/e2.txz, .device/run.sh.
[ -d build/bin ] || python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/e2.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s30c6; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
E=.device/e2/bin
for t in cuda_test_gemv cuda_test_cuda_backend; do
  timeout 120 "$E/$t" > "$OUT/e2_$t.log" 2>&1
  echo "e2 $t rc=$? $(grep -E 'assertions' "$OUT/e2_$t.log" | tr -s ' ')"
done
for v in main e2; do
  b=build/bin; [ $v = e2 ] && b=$E
  "$b/cuda_bench" "$OUT/chain_$v.json" --only gemv_chain > "$OUT/chain_$v.log" 2>&1
  echo "chain $v rc=$?"; grep -E "layers only|default" "$OUT/chain_$v.log" | head -2
  "$b/cuda_bench" "$OUT/step_$v.json" --step-case 1 600,2000 > "$OUT/step_$v.log" 2>&1
  echo "step $v rc=$?"; grep -E "without (nothing|attention)" "$OUT/step_$v.log"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for v in main e2; do
  b=build/bin; [ $v = e2 ] && b=$E
  "$b/loom" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s30c6.tgz" -C "$OUT" .
