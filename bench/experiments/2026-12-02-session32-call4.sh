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
# 2-6% faster; if it does not, no change. The same binary also carries session 28's cp.async
# ring GEMV for one row, ported (LOOM_GEMV_RING=3: 3 x 64 KB a block, 80-83 registers against
# 104-120, 0 spills; bench/experiments/2026-12-02-carveout-and-gemv-ring-env.patch): if the
# split change is what made it lose in the step, with one carveout it should keep its chain win
# (session 28: layers 0.707 -> 0.676 ms) in the step: batch 1 ~3% faster.
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_cuda_backend cuda_test_gemv" \
#     -o .device/co.txz co=bench/experiments/2026-12-02-carveout-and-gemv-ring-env.patch
#   cp bench/experiments/2026-12-02-session32-call4.sh .device/run.sh
# carry .device/co.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/co.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s32c4; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/co/bin
LOOM_CARVEOUT=100 LOOM_GEMV_RING=3 timeout 100 $B/cuda_test_gemv > "$OUT/test_gemv_ring.log" 2>&1
echo "gemv test, ring 3 rc=$? $(grep -E 'assertions' "$OUT/test_gemv_ring.log" | tr -s ' ')"
LOOM_CARVEOUT=100 LOOM_GEMV_RING=3 timeout 150 $B/cuda_test_cuda_backend > "$OUT/test_co100.log" 2>&1
echo "backend test, carveout 100 ring 3 rc=$? $(grep -E 'assertions' "$OUT/test_co100.log" | tr -s ' ')"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
V="-2,0 100,0 100,3 -2,3"
for cv in $V; do c=${cv%,*}; g=${cv#*,}
  LOOM_CARVEOUT=$c LOOM_GEMV_RING=$g timeout 100 $B/cuda_bench "$OUT/step_b1_${c}_$g.json" --step-case 1 600,2000 > "$OUT/step_b1_${c}_$g.log" 2>&1
  echo "step case b1 carveout $c ring $g rc=$?"
done
tar czf "$FINAL/s32c4.tgz" -C "$OUT" .
for r in 1 2; do for cv in $V; do c=${cv%,*}; g=${cv#*,}
  LOOM_CARVEOUT=$c LOOM_GEMV_RING=$g $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,4,8 --json "$OUT/bench_${c}_${g}_$r.json" > "$OUT/bench_${c}_${g}_$r.log" 2>&1
  echo "carveout $c ring $g r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${c}_${g}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s32c4.tgz" -C "$OUT" .
