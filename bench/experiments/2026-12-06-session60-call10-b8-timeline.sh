#!/bin/bash
# Session 60, call 10: batch 8's raw timeline (cuda_bench now keeps it for batch 8 at ctx 600
# too) with and without math and waits, through scripts/mega_timeline.py: which CTA ends each
# op of a layer along the chain at batch 8, and what its attention units spend. Carry
# .device/s60t.txz (main's build with that bench change).
python3 -c "import tarfile; tarfile.open('.device/s60t.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
LOOM_BENCH_MEGA_SWEEPS=none LOOM_BENCH_MEGA_TRACE="8,600,0;8,600,3" \
  timeout 150 build/bin/cuda_bench "$OUT/trace_b8.json" --megakernel > "$OUT/trace_b8.log" 2>&1
echo "trace rc=$?"; python3 scripts/mega_timeline.py "$OUT/trace_b8.json" | tee "$OUT/chain_b8.txt"
