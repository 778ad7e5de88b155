#!/bin/bash
# Session 60, call 8: main's megakernel after the session (the README's figures): the steps
# table (b1 ctx 600 / 7,000, b8 ctx 600, graph path beside), skip_math at b8, the ring knobs
# at b1 and b8 (gemv_ahead: off beat on at b1 in calls 1-2 by 65 and 6 us), and traces of b8
# and b1 at ctx 600. Carry .device/s60f.txz.
python3 -c "import tarfile; tarfile.open('.device/s60f.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
for r in 1 2; do
  LOOM_BENCH_MEGA_SWEEPS=gemv_ahead,gemv_ahead_b8,gemv_inflight_b8,gemv_early_b8,skip_math_b8 \
    LOOM_BENCH_MEGA_TRACE="8,600,0;1,600,0" \
    timeout 200 build/bin/cuda_bench "$OUT/bench_$r.json" --megakernel > "$OUT/bench_$r.log" 2>&1
  echo "== round $r rc=$?"; grep -E "^(1|8) |^ +[0-9]+: graph|\(batch" "$OUT/bench_$r.log"
done
grep -A14 "megakernel batch 8" "$OUT/bench_2.log"
