#!/bin/bash
# Session 59, call 3. Call 2 (H100): v12's refill before the item's barriers made b8 worse
# (2,646 for v10 -> 2,768; skip_math 0 - 1 = 300 us, session 58: 83): each warp's lane 0 now
# issued its 8-15 bulk copies before arriving at the barrier. The host-set attn_in_xs gave b1
# v10's time back (1,689 / 1,693 against v10's 1,690 / 1,694). v13 = v12 without the early
# refill: v11's stream through attention at b8 with the flag from the host.
# Predictions: b8 ~2,570 (v11 in call 1), b1 and ctx 7,000 as v10.
python3 -c "
import tarfile
for p in ('.device/s58t.txz', '.device/v8.txz', '.device/v10.txz', '.device/v13.txz'):
    tarfile.open(p).extractall()"
. scripts/device_env.sh
W=/tmp/s59_3; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
ln -sf cuda_bench build/bin/cuda_bench_v8
timeout 150 build/bin/cuda_test_megakernel_v13 > "$OUT/test_v13.log" 2>&1
echo "test v13 rc=$?"; grep -E "ERROR|assertions|Status" "$OUT/test_v13.log" | head -20
for r in 1 2; do
  for v in v8 v10 v13; do
    LOOM_BENCH_MEGA_SWEEPS=none timeout 100 build/bin/cuda_bench_$v "$W/${v}_$r.json" --megakernel > "$W/${v}_$r.log" 2>&1
    echo "== $v round $r rc=$?" | tee -a "$OUT/bench.log"
    grep -E "^(1|8) +[0-9]+ +(graph|mega)" "$W/${v}_$r.log" | tee -a "$OUT/bench.log"
  done
done
LOOM_BENCH_MEGA_SWEEPS=skip_math_b8 LOOM_BENCH_MEGA_TRACE="8,600,0;8,600,3" \
  timeout 120 build/bin/cuda_bench_v13 "$W/trace_v13.json" --megakernel > "$OUT/trace_v13.log" 2>&1
echo "== trace v13 rc=$?"; grep -E "^megakernel batch|^  [a-z]|\(batch|^ +[0-9]+: graph" "$OUT/trace_v13.log"
tar czf "$OUT/s59_3_json.tgz" -C "$W" .
