#!/bin/bash
# Session 60, call 4: ctest -L cuda on 940200e (the tensor-core segments as TMA boxes; its
# cuda_test_megakernel passed in call 3, so excluded here), then where batch 8's step goes
# now: traces at b8 ctx 600 with and without math and waits. Carry .device/s60n.txz.
python3 -c "import tarfile; tarfile.open('.device/s60n.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 330 ctest -L cuda -E megakernel --output-on-failure > "$OUT/ctest.log" 2>&1); echo "ctest rc=$?"
grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.log" | tail -6
LOOM_BENCH_MEGA_SWEEPS=none LOOM_BENCH_MEGA_TRACE="8,600,0;8,600,3" \
  timeout 150 build/bin/cuda_bench "$OUT/trace_b8.json" --megakernel > "$OUT/trace_b8.log" 2>&1
echo "trace rc=$?"; grep -A16 "megakernel batch 8" "$OUT/trace_b8.log"
