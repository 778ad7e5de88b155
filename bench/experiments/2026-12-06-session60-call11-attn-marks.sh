#!/bin/bash
# Session 60, call 11 (branch attn-marks, not for main): batch 8 attention units phases in the
# trace (staged: K/V and q landed; waited: staged -> partials written; end: after the fold).
# Carry .device/s60x.txz.
python3 -c "import tarfile; tarfile.open('.device/s60x.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/device.txt"
LOOM_BENCH_MEGA_SWEEPS=none LOOM_BENCH_MEGA_TRACE="8,600,0;8,600,3" \
  timeout 150 build/bin/cuda_bench "$OUT/trace_b8_marks.json" --megakernel > "$OUT/trace_b8_marks.log" 2>&1
echo "trace rc=$?"
