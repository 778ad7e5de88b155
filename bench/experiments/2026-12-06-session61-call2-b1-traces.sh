#!/bin/bash
# Session 61, call 2: where batch 1's staging time goes. Session 61 call 1's b1 timeline: from
# a wait satisfied to the input staged the late CTA takes 4.5 us (qkv's RMSNorm of 8 KB of x),
# 2.3 (o_proj), 6.5 (gate_up), 6.7 (down) -- one L2 round trip each, ~17 us of a 58 us layer
# along the chain. Reading: L2 hits queue behind the ring's in-flight weight misses (~128 KB an
# SM). Raw timelines of b1 ctx 600 with the ring's knobs changed (gemv_early 1 / 3,
# gemv_inflight 1, attn_apart off) beside the default, and b8's on main + attention_mma.
# Predicted if the reading holds: fewer segments in flight at the wait -> shorter staging.
# Carry .device/s61t.txz (main 2b79bde + the trace knobs, run pack).
set -u
python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" .device/s61t.txz
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
LOOM_BENCH_MEGA_SWEEPS=none LOOM_BENCH_MEGA_TRACE="1,600,0;1,600,0,1;1,600,0,3;1,600,0,0,1;1,600,0,0,0,1;8,600,0;1,600,3" \
  timeout 200 build/bin/cuda_bench "$OUT/traces.json" --megakernel > "$OUT/bench.log" 2>&1
echo "rc=$?"
python3 scripts/mega_timeline.py "$OUT/traces.json" | tee "$OUT/timeline.txt"
