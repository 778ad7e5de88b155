#!/bin/bash
# Session 30's third device call: the one-row FMA GEMV with its weights through a per-warp
# cp.async ring small enough (≤ 64 registers, 6 KB a warp) that two blocks fit an SM, launched
# on one block an SM, so the next GEMV's block starts streaming beside the current one instead
# of after it (bench/experiments/2026-12-02-gemv-ring-two-blocks-an-sm.patch; LOOM_GEMV_RING=S[,PRE]
# picks 3 stages of 2 KB or 6 of 1 KB a warp, PRE stages before the PDL wait). Session 28's ring
# (192 KB, one block an SM) won in the chain and lost in the step; this one leaves room.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_gemv cuda_test_cuda_backend" \
#     -o .device/ring.txz ring=bench/experiments/2026-12-02-gemv-ring-two-blocks-an-sm.patch
#   cp bench/experiments/2026-12-02-session30-call3.sh .device/run.sh
# carry .device/base.txz (main's tests pack), .device/ring.txz, .device/run.sh.
[ -d build/bin ] || python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/ring.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s30c3; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
R=.device/ring/bin
for v in 3 6; do for t in cuda_test_gemv cuda_test_cuda_backend; do
  LOOM_GEMV_RING=$v timeout 120 "$R/$t" > "$OUT/ring${v}_$t.log" 2>&1
  echo "ring $v $t rc=$? $(grep -E 'assertions' "$OUT/ring${v}_$t.log" | tr -s ' ')"
done; done
for v in 0 3 6 3,3 6,5; do
  LOOM_GEMV_RING=$v "$R/cuda_bench" "$OUT/chain_$v.json" --only gemv_chain > "$OUT/chain_$v.log" 2>&1
  echo "chain ring $v rc=$?"; grep -E "layers only|default" "$OUT/chain_$v.log" | head -3
done
for v in 0 3 6; do
  LOOM_GEMV_RING=$v "$R/cuda_bench" "$OUT/step_$v.json" --step-case 1 600 > "$OUT/step_$v.log" 2>&1
  echo "step ring $v rc=$?"; grep -E "without (nothing|attention|all but attention)" "$OUT/step_$v.log"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in main 0 3 6 3,3; do
  b=$R; [ $v = main ] && b=build/bin
  LOOM_GEMV_RING=$v "$b/loom" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s30c3.tgz" -C "$OUT" .
