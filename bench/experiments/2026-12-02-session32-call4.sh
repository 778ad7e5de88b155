#!/bin/bash
# Session 32's fourth device call (~3 minutes). Hypothesis: the L1 / shared-memory split an SM
# runs with is chosen per kernel, and an SM cannot change it while blocks of another split are
# resident, so where consecutive kernels want different splits (the one-block-an-SM GEMVs with
# ~6 KB of shared memory, the decode attention with 72 KB blocks three an SM) a block of the
# next kernel cannot start beside the previous one's until the SM drains. It would explain why
# batch 1's attention costs ~9.7 us a layer in the step for ~2 us of work, and why session 28's
# 192 KB ring GEMV won in the GEMV-only chain and lost in the step. Test: every kernel launched
# through launch_kernel prefers the maximum shared memory (LOOM_CARVEOUT=100,
# bench/experiments/2026-12-02-carveout-env.patch), so all of them ask for the same split.
# Predicted if the hypothesis holds: batch 1 attention in the step 0.21 -> ~0.12 ms, batch 1
# 2-6% faster; if it does not, no change.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_cuda_backend" -o .device/co.txz \
#     co=bench/experiments/2026-12-02-carveout-env.patch
#   cp bench/experiments/2026-12-02-session32-call4.sh .device/run.sh
# carry .device/co.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/co.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s32c4; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/co/bin
LOOM_CARVEOUT=100 timeout 150 $B/cuda_test_cuda_backend > "$OUT/test_co100.log" 2>&1
echo "backend test, carveout 100 rc=$? $(grep -E 'assertions' "$OUT/test_co100.log" | tr -s ' ')"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for v in -2 100; do
  LOOM_CARVEOUT=$v timeout 100 $B/cuda_bench "$OUT/step_b1_$v.json" --step-case 1 600,2000 > "$OUT/step_b1_$v.log" 2>&1
  echo "step case b1 carveout $v rc=$?"
done
tar czf "$FINAL/s32c4.tgz" -C "$OUT" .
for r in 1 2; do for v in -2 100; do
  LOOM_CARVEOUT=$v $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,4,8 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "carveout $v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s32c4.tgz" -C "$OUT" .
