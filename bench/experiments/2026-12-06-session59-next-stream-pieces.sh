#!/bin/bash
# Prepared in session 59 for session 60 (not run): two questions the session-59 traces leave.
# (1) Does a segment of many small bulk copies stream slower? The tensor-core GEMVs' 4 KB
#     segment is 8 rows x 512 bytes, 15 copies where 7 rows' rotation wraps; at batch 8 the
#     GEMVs stream 1.6x batch 1's time with neither math nor waits. `cuda_bench --only
#     weight_stream` now has ring configs "rows 8 split 1 / 2" beside the one-copy segments
#     (predicted: if the copies' count matters, rows 8 split 2 well under W 16 seg 4K S 2's 87%
#     of copy; if not, within a few %).
# (2) Batch 1's Qkv: the late CTA's units take 6.9-9.5 us for one or two 64 KB tiles (session 59,
#     scripts/mega_timeline.py). A fresh raw timeline with and without math and waits, analysed
#     on the device.
# Binaries: pack this tree first (scripts/pack_device.sh tests build .device/s60t.txz: its
# cuda_bench has the new ring configs), carry .device/s60t.txz.
python3 -c "import tarfile; tarfile.open('.device/s60t.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 120 build/bin/cuda_bench "$OUT/weight_stream.json" --only weight_stream > "$OUT/weight_stream.log" 2>&1
echo "weight_stream rc=$?"; cat "$OUT/weight_stream.log" | tail -25
LOOM_BENCH_MEGA_SWEEPS=none LOOM_BENCH_MEGA_TRACE="1,600,0;1,600,3" \
  timeout 150 build/bin/cuda_bench "$OUT/trace_b1.json" --megakernel > "$OUT/trace_b1.log" 2>&1
echo "trace rc=$?"; python3 scripts/mega_timeline.py "$OUT/trace_b1.json" | tee "$OUT/chain_b1.txt"
