#!/bin/bash
# Session 31's first device call (~5 minutes).
# (1) Prepared in session 30, no code change: where batch 8's attention (0.445 ms a step, ~20 µs
#     a layer) goes: the batch-8 step with each family left out and the block caps toggled, at
#     contexts around the bench's, with batch 1 at ctx 600 beside it.
# (2) The o GEMV's blocks bulk-prefetch the first LOOM_L2_NEXT_KB of gate_up's weights into L2
#     before their PDL wait, i.e. while attention's ~12 blocks leave HBM idle
#     (bench/experiments/2026-12-02-gemv-o-prefetches-gate-up-into-l2.patch). Predicted: gate_up
#     (18 µs a layer alone, latency-bound at 2.6 TB/s) reads part of its 46 MB from L2: up to
#     ~5 µs a layer less, the batch-1 step ~0.1 ms faster; the risk is attention's own loads
#     queued behind the prefetches (the megakernel's prefetch at the OProj wait lost 0.3-2%).
# Build here first:
#   make -C build -j3 && scripts/pack_device.sh run build .device/base.txz
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_cuda_backend" -o .device/l2.txz \
#     l2=bench/experiments/2026-12-02-gemv-o-prefetches-gate-up-into-l2.patch
#   cp bench/experiments/2026-12-02-session31-call1.sh .device/run.sh
# carry .device/base.txz, .device/l2.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/l2.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c1; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
L=.device/l2/bin
LOOM_L2_NEXT_KB=32768 timeout 120 $L/cuda_test_cuda_backend > "$OUT/l2_test.log" 2>&1
echo "l2 test rc=$? $(grep -E 'assertions' "$OUT/l2_test.log" | tr -s ' ')"
for kb in 0 8192 16384 24576 32768; do
  LOOM_L2_NEXT_KB=$kb $L/cuda_bench "$OUT/step_l2_$kb.json" --step-case 1 600,2000 > "$OUT/step_l2_$kb.log" 2>&1
  echo "step l2 $kb rc=$?"; grep -E "without (nothing|attention)" "$OUT/step_l2_$kb.log"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in main 0 16384 32768; do
  b=$L; [ $v = main ] && b=build/bin
  LOOM_L2_NEXT_KB=$v "$b/loom" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
build/bin/cuda_bench "$OUT/step_b8.json" --step-case 8 600,2000,4000 > "$OUT/step_b8.log" 2>&1
echo "b8 rc=$?"; grep -E "graph without" "$OUT/step_b8.log"
tar czf "$FINAL/s31c1.tgz" -C "$OUT" .
