#!/bin/bash
# Session 56 call 3: call 2 measured MegaShared sized by the batch (static shared memory 1,744
# bytes at batch 1 instead of 4,880) 92 us a step slower at b1 ctx 600 with the same layout
# (256-key partitions beside a 2-slot ring; 1,927.6 vs 1,834-1,836 us), unexplained. The
# dynamic buffer starts right after the static variables, so the ring's slots moved from 784 to
# 720 mod 1,024 (16 to 80 mod 128). Sweep of MegakernelDebug::smem_skew on main's kernel: the
# layout shifted by 0, 112 (ring 128-aligned), 240 (1,024-aligned), 960 (where the small
# MegaShared put it), 48, 0. Predicted: if the offset is the cause, 960 is ~90 us slower than
# 0 and an aligned skew may be faster than 0. Carry .device/s56.txz and .device/skew56.txz.
python3 -c "import tarfile; tarfile.open('.device/s56.txz').extractall(); tarfile.open('.device/skew56.txz').extractall()"
. scripts/device_env.sh
W=/tmp/s56_3; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
LOOM_BENCH_MEGA_SWEEPS=smem_skew,skip_math timeout 120 build/bin/cuda_bench "$W/skew.json" --megakernel > "$W/skew.log" 2>&1
echo "rc=$?"; grep -E "^1 |^8 |^ +[0-9]+:" "$W/skew.log"
tar czf "$OUT/s56_3.tgz" -C "$W" .
