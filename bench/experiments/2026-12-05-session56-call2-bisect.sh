#!/bin/bash
# Session 56 call 2: call 1 found the megakernel ~130 us a step slower than session 55's at b1
# ctx 600 on the H100 (1,930 vs 1,795-1,803; skip_math 3 1,387 vs 1,307) in both layouts, the
# graph path unchanged (1,344). Which change: cuda_bench of main's CUDA code (base, the s55b
# pack), this session's (new), new with MegaShared at its old size (va: static 4,880 bytes,
# so b1 keeps 256-key partitions and a 2-slot ring), new without the register fetch of a
# split's next partition (vb). Each: the step table and the skip_math sweep, base first and
# last. Carry .device/s56.txz and .device/var56.txz.
python3 -c "import tarfile; tarfile.open('.device/s56.txz').extractall(); tarfile.open('.device/var56.txz').extractall()"
. scripts/device_env.sh
W=/tmp/s56_2; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
for v in base new va vb base; do
  LOOM_BENCH_MEGA_SWEEPS=skip_math timeout 100 build/bin/cuda_bench.$v "$W/$v.json" --megakernel > "$W/$v.log" 2>&1
  echo "== $v rc=$?"; grep -E "^1 |^8 |^    [0-3]:" "$W/$v.log"
done
tar czf "$OUT/s56_2.tgz" -C "$W" .
