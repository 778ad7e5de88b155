#!/bin/bash
# Session 30's fourth device call. Call 3's ring binary at LOOM_GEMV_RING=0 (the register
# kernel, main's code) ran batch 1 ~1% faster than main in both rounds (0.7382 / 0.7375 against
# 0.7452 / 0.7467 s/frame): its gemv_kernel had __launch_bounds__(512, 1) instead of (512), and
# with the explicit one block an SM ptxas gives the one-row kernels 104-120 registers instead of
# 97-98 (the 2-8-row kernels are unchanged). This call measures that change alone
# (bench/experiments/2026-12-02-gemv-launch-bounds-min-blocks-1.patch) against main, three
# rounds alternated, with the GEMV chain, the batch-1 step and the GEMV and backend tests.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_gemv cuda_test_cuda_backend" \
#     -o .device/lb.txz lb=bench/experiments/2026-12-02-gemv-launch-bounds-min-blocks-1.patch
#   cp bench/experiments/2026-12-02-session30-call4.sh .device/run.sh
# carry .device/base.txz (main's tests pack), .device/lb.txz, .device/run.sh.
[ -d build/bin ] || python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/lb.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s30c4; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
L=.device/lb/bin
for t in cuda_test_gemv cuda_test_cuda_backend; do
  timeout 120 "$L/$t" > "$OUT/lb_$t.log" 2>&1
  echo "lb $t rc=$? $(grep -E 'assertions' "$OUT/lb_$t.log" | tr -s ' ')"
done
for v in main lb; do
  b=build/bin; [ $v = lb ] && b=$L
  "$b/cuda_bench" "$OUT/chain_$v.json" --only gemv_chain > "$OUT/chain_$v.log" 2>&1
  echo "chain $v rc=$?"; grep -E "layers only|default" "$OUT/chain_$v.log" | head -2
  "$b/cuda_bench" "$OUT/step_$v.json" --step-case 1 600,2000 > "$OUT/step_$v.log" 2>&1
  echo "step $v rc=$?"; grep -E "without (nothing|attention)" "$OUT/step_$v.log"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for v in main lb; do
  b=build/bin; [ $v = lb ] && b=$L
  "$b/loom" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s30c4.tgz" -C "$OUT" .
