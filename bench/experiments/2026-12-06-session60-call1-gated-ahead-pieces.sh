#!/bin/bash
# Session 60, call 1: both of session 59's prepared questions in one call, on branch
# mega-gated-ahead's build (rebased on main, so its cuda_bench has main's ring configs and its
# default gemv_ahead is main's): (1) gemv_ahead 3 (the next GEMV's stream opens only once the
# last segment before landed) against 0/1/2, batch 1 and 8, twice, with test_megakernel's f32
# and bf16 comparisons first; (2) weight_stream's "rows 8 split 1/2" ring configs; (3) a b1 raw
# timeline with and without math and waits through scripts/mega_timeline.py.
# Predictions: see the two session-59 scripts (gated: b1 qkv chain 10.6 -> ~6 us a layer,
# step -50..-100 us if queueing is the cause; pieces: within a few % if the copies' count
# does not matter). Pack: scripts/pack_device.sh tests build .device/s60g.txz (branch build).
python3 -c "import tarfile; tarfile.open('.device/s60g.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 150 build/bin/cuda_test_megakernel > "$OUT/test.log" 2>&1
echo "test rc=$?"; grep -E "ERROR|assertions|Status" "$OUT/test.log" | head
for r in 1 2; do
  LOOM_BENCH_MEGA_SWEEPS=gemv_ahead,gemv_ahead_b8 timeout 120 build/bin/cuda_bench \
    "$OUT/sweep_$r.json" --megakernel > "$OUT/sweep_$r.log" 2>&1
  echo "== round $r rc=$?"; grep -A4 -E "next GEMVs" "$OUT/sweep_$r.log"
done
timeout 60 build/bin/cuda_bench "$OUT/weight_stream.json" --only weight_stream > "$OUT/weight_stream.log" 2>&1
echo "weight_stream rc=$?"; tail -25 "$OUT/weight_stream.log"
LOOM_BENCH_MEGA_SWEEPS=none LOOM_BENCH_MEGA_TRACE="1,600,0;1,600,3" \
  timeout 100 build/bin/cuda_bench "$OUT/trace_b1.json" --megakernel > "$OUT/trace_b1.log" 2>&1
echo "trace rc=$?"; python3 scripts/mega_timeline.py "$OUT/trace_b1.json" > "$OUT/chain_b1.txt" 2>&1; head -60 "$OUT/chain_b1.txt"
