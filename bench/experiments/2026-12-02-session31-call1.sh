#!/bin/bash
# Prepared in session 30 for session 31's first device call (~2 minutes): where batch 8's
# attention (0.445 ms a step, ~20 µs a layer) goes. The split decode kernel at 8 sequences, the
# batch-8 step with each family left out and the blocks caps toggled, at contexts around the
# bench's, with batch 1 at ctx 600 beside it for the same machine. No code change: main as it is.
# Build here first: make -C build -j3 && scripts/pack_device.sh run build .device/base.txz;
#   cp bench/experiments/2026-12-02-session31-call1.sh .device/run.sh
# carry .device/base.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c1; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
build/bin/cuda_bench "$OUT/step_b8.json" --step-case 8 600,2000,4000 > "$OUT/step_b8.log" 2>&1
echo "b8 rc=$?"; grep -E "graph without" "$OUT/step_b8.log"
build/bin/cuda_bench "$OUT/step_b1.json" --step-case 1 600 > "$OUT/step_b1.log" 2>&1
echo "b1 rc=$?"; grep -E "without (nothing|attention|all but attention)" "$OUT/step_b1.log"
tar czf "$FINAL/s31c1.tgz" -C "$OUT" .
