#!/bin/bash
# Session 56 call 6: Down's SiLU·mul input staged by cp.async through attention's buffers
# (MegakernelDebug::down_smem 2) at batch 1-2 where they sit beside the ring: one L2 round trip
# for gu instead of two (call 5: down 1.5x its bytes with neither math nor waits, its staging
# 102 us a CTA a step). Predicted: -30 to -45 us a step at b1 ctx 600. cuda_test_megakernel
# first (down_smem in the bf16 graph comparison and under 1,000 jittered replays at batch 2
# against a base without it: the same bits), then main's cuda_bench (f4dde89, skew56 pack) and
# this one's with the down_smem sweep (1/2 alternated) and skip_math, base again last.
# Carry .device/s56.txz, .device/skew56.txz, .device/ds56.txz.
python3 -c "import tarfile; [tarfile.open('.device/' + p).extractall() for p in ('s56.txz', 'skew56.txz', 'ds56.txz')]"
. scripts/device_env.sh
W=/tmp/s56_6; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 120 build/bin/cuda_test_megakernel > "$W/test.log" 2>&1; echo "test rc=$?"; tail -4 "$W/test.log"
LOOM_BENCH_MEGA_SWEEPS=skip_math timeout 100 build/bin/cuda_bench "$W/base.json" --megakernel > "$W/base.log" 2>&1
echo "== base rc=$?"; grep -E "^1 |^8 |^ +[0-9]+:" "$W/base.log"
LOOM_BENCH_MEGA_SWEEPS=down_smem,skip_math timeout 100 build/bin/cuda_bench.ds "$W/ds.json" --megakernel > "$W/ds.log" 2>&1
echo "== ds rc=$?"; grep -E "^1 |^8 |^ +[0-9]+:" "$W/ds.log"
LOOM_BENCH_MEGA_SWEEPS=skip_math timeout 100 build/bin/cuda_bench "$W/base2.json" --megakernel > "$W/base2.log" 2>&1
echo "== base2 rc=$?"; grep -E "^1 |^8 " "$W/base2.log"
tar czf "$OUT/s56_6.tgz" -C "$W" .
