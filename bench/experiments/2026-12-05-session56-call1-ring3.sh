#!/bin/bash
# Session 56 call 1: the batch-1 weight ring at 3 slots a warp beside attention (partitions of at
# most 64 keys, MegaShared sized by the batch, the static shared memory read from the kernel
# instead of a 1 KB guess). Session 55: a 2-slot ring streams at 87% of copy on its own (1.15x
# the floor before any wait), 3 slots at 103%; skip_math 3 (neither math nor waits) 1,307 us.
# Predicted: skip_math 3 1,307 -> ~1,170 us; the step at ctx 600 1,795 -> ~1,650 us; at ctx
# 3,000 / 7,000 the 64-key partitions cost more round trips (a split walks 2-4, the fold 4-12
# chunks), so the gain shrinks or turns. ctest of the megakernel first (64-key partitions under
# f32 exactness, bf16, jitter at batch 2 with the 3-slot ring), then the sweeps: skip_math with
# the new layout and with 256-key partitions (the old one), attn_max_keys 64/256 alternated at
# ctx 600/3,000/7,000, gemv_early and gemv_inflight (their best may move with the depth). Carry `scripts/pack_device.sh tests build .device/s56.txz`.
python3 -c "import tarfile; tarfile.open('.device/s56.txz').extractall()"
. scripts/device_env.sh
W=/tmp/s56_1; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -R "megakernel" --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
grep -E "tests passed|Failed|rc=|FAIL|ERROR" "$W/ctest.log" | head -20
LOOM_BENCH_MEGA_SWEEPS=skip_math,attn_max_keys,gemv_early,gemv_inflight timeout 200 build/bin/cuda_bench "$W/mega.json" --megakernel > "$W/mega.log" 2>&1
echo "bench rc=$?"; grep -vE "^\s*$" "$W/mega.log" | head -60
python3 scripts/mega_timeline.py "$W/mega.json" > "$W/timeline.txt" 2>&1; head -40 "$W/timeline.txt"
tar czf "$OUT/s56_1.tgz" -C "$W" .
