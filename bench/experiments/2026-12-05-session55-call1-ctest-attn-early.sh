#!/bin/bash
# Session 55 call 1: session 54 call 4 (below) with ctest of the megakernel and install on main 6eeb9b4.
# Prepared in session 54: the megakernel's attention K/V staged as soon as its buffers are free
# (MegakernelDebug::attn_early 2: with the first instruction and after each AttnPartial) instead
# of with the instruction before it (1, the default). Call 3's timeline (H100, b1 ctx 600): the
# CTA that ends a layer's attention spends 12.5 us on its unit after its wait, for 64 keys; its
# K/V cp.async was issued with its Qkv instruction, at the moment every ring refills (~17 MB in
# flight, ~5.7 us of HBM), so the cached keys queue behind the weights. Predicted: attention's
# span 10.4 -> ~6 us a layer, -60 to -100 us a step at ctx 600. ctest of the megakernel (it runs
# attn_early 2 against the graph path in f32 and bf16, and under jitter at batch 2), the cuda
# backend and test_install first, then cuda_bench --megakernel with only that sweep (1/2
# alternated) and the timeline of the default. Keep attn_early on by default if the sweep
# gains. Carry a tests pack of main (`scripts/pack_device.sh tests build .device/s55.txz`).
python3 -c "import tarfile; tarfile.open('.device/s55.txz').extractall()"
. scripts/device_env.sh
W=/tmp/s55_1; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 150 ctest -R "megakernel|test_install" --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
grep -E "tests passed|Failed|rc=" "$W/ctest.log"
LOOM_BENCH_MEGA_SWEEPS=attn_early timeout 100 build/bin/cuda_bench "$W/mega.json" --megakernel > "$W/mega.log" 2>&1
echo "bench rc=$?"; grep -E "^1 |^8 " "$W/mega.log"; grep -A5 "attention's K/V staged" "$W/mega.log"
python3 scripts/mega_timeline.py "$W/mega.json" > "$W/timeline.txt" 2>&1; cat "$W/timeline.txt"
tar czf "$OUT/s55_1.tgz" -C "$W" .
