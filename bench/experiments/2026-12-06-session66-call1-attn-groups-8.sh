#!/bin/bash
# Session 66, call 1: branch attn-groups-8b (attn-groups-8 on main 43867df; .device/g8b.txz, a
# tests pack) — the attention groups as eight groups of 2 warps with 32-key partitions (each
# group's buffers ~9 KB, eight chains an SM where main runs four of 64 keys) against main
# 43867df (.device/m66.txz): main's cuda_test_megakernel first (the review's bf16 block-size-64
# settings with 1 and 2 splits never ran on a GPU), then the branch's, base / change twice, loom
# bench batch 8. Predicted: b8 ctx 7,000 2,381-2,406 -> ~2,150-2,250 us (more chains in flight),
# ctx 600 and b1 unchanged. Repack: `git checkout attn-groups-8b && cmake --build build &&
# scripts/pack_device.sh tests build .device/g8b.txz`, and from main the same as .device/m66.txz.
set -u
mkdir -p m && (cd m && python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" ../.device/m66.txz)
. scripts/device_env.sh
(cd m && timeout 300 build/bin/cuda_test_megakernel > "$OUT/test_main.log" 2>&1; echo "main test rc=$?")
grep -E "ERROR|assertions|Status" "$OUT/test_main.log" | head
bash scripts/mega_ab.sh .device/g8b.txz .device/m66.txz none 8
