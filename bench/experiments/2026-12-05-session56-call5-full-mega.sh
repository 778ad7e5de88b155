#!/bin/bash
# Session 56 call 5: the whole cuda_bench --megakernel on main's kernel (f4dde89): every sweep
# and the four traces, among them batch 1 ctx 600 with neither dot products nor waits
# (skip_math 3), whose per-op busy time against each op's bytes is session 57's starting
# point (the no-math-no-waits step is 1.30x the floor with any ring depth). Carry
# .device/s56.txz and .device/skew56.txz.
python3 -c "import tarfile; tarfile.open('.device/s56.txz').extractall(); tarfile.open('.device/skew56.txz').extractall()"
. scripts/device_env.sh
W=/tmp/s56_5; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 400 build/bin/cuda_bench "$W/full.json" --megakernel > "$W/full.log" 2>&1
echo "rc=$?"; grep -vE "^\s*$" "$W/full.log" | tail -75
tar czf "$OUT/s56_5.tgz" -C "$W" .
