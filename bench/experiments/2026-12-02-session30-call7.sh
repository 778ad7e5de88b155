#!/bin/bash
# Session 30's seventh device call: the one-row GEMV stages its input by one bulk copy (TMA)
# into shared memory (bk: bench/experiments/2026-12-02-gemv-one-row-bulk-staging.patch) instead
# of the threads' 16-byte loads, which queue behind the weight batches in flight (session 27,
# calls 5-9); bk2 = bk with the second weight batch before the PDL wait too
# (…-bulk-staging-second-batch-early.patch). Chain, batch-1 step, loom bench b1 in two rounds
# alternated with main, the GEMV and backend tests.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_gemv cuda_test_cuda_backend" \
#     -o .device/bk.txz bk=bench/experiments/2026-12-02-gemv-one-row-bulk-staging.patch \
#     bk2=bench/experiments/2026-12-02-gemv-one-row-bulk-staging-second-batch-early.patch
#   cp bench/experiments/2026-12-02-session30-call7.sh .device/run.sh
# carry .device/base.txz (main's tests pack), .device/bk.txz, .device/run.sh.
[ -d build/bin ] || python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/bk.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s30c7; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for v in bk bk2; do for t in cuda_test_gemv cuda_test_cuda_backend; do
  timeout 120 ".device/$v/bin/$t" > "$OUT/${v}_$t.log" 2>&1
  echo "$v $t rc=$? $(grep -E 'assertions' "$OUT/${v}_$t.log" | tr -s ' ')"
done; done
for v in main bk bk2; do
  b=build/bin; [ $v != main ] && b=.device/$v/bin
  "$b/cuda_bench" "$OUT/chain_$v.json" --only gemv_chain > "$OUT/chain_$v.log" 2>&1
  echo "chain $v rc=$?"; grep -E "layers only|default" "$OUT/chain_$v.log" | head -2
  "$b/cuda_bench" "$OUT/step_$v.json" --step-case 1 600,2000 > "$OUT/step_$v.log" 2>&1
  echo "step $v rc=$?"; grep -E "without (nothing|attention)" "$OUT/step_$v.log"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in main bk bk2; do
  b=build/bin; [ $v != main ] && b=.device/$v/bin
  "$b/loom" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s30c7.tgz" -C "$OUT" .
