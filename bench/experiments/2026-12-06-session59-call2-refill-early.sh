#!/bin/bash
# Session 59, call 2. Call 1 (H100): v10 (staged inputs in their consumer's order) b8 ctx 600
# 2,782 -> 2,644 us, v11 (+ the stream through attention at b8) 2,568; but b1 ctx 600 1,699 ->
# 1,712 (v10) -> 1,735 (v11) and ctx 7,000 1,857 -> 1,872 -> 1,921, though v11 changes nothing
# at b1 but the pump's test (attn_over_ring computed on the device). The b8 trace without math
# or waits: the GEMVs' streaming 1.64x batch 1's (gate_up 447 against 235 us a CTA, lm_head
# 415 / 304, down 252 / 133): with 2 ring slots a warp and one segment an item at k = 2048,
# the slot was refilled only after the item's barriers.
# v12 = v11 with (a) the pump's test a host-set flag (MegaArgs::attn_in_xs), so batch 1's code
# is v10's (ptxas: the same registers in every non-mma instantiation), and (b) at 4-8 slots a
# warp's slot refilled right after its segment's k-steps, before the item's barriers.
# Predictions: b1 back to v10's (1,712 / 1,872); b8 2,568 -> ~2,300-2,450.
# Binaries as in call 1 plus .device/v12.txz (cuda_bench_v12, cuda_test_megakernel_v12).
python3 -c "
import tarfile
for p in ('.device/s58t.txz', '.device/v8.txz', '.device/v10.txz', '.device/v12.txz'):
    tarfile.open(p).extractall()"
. scripts/device_env.sh
W=/tmp/s59_2; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
ln -sf cuda_bench build/bin/cuda_bench_v8
timeout 150 build/bin/cuda_test_megakernel_v12 > "$OUT/test_v12.log" 2>&1
echo "test v12 rc=$?"; grep -E "ERROR|assertions|Status" "$OUT/test_v12.log" | head -20
for r in 1 2; do
  for v in v8 v10 v12; do
    LOOM_BENCH_MEGA_SWEEPS=none timeout 100 build/bin/cuda_bench_$v "$W/${v}_$r.json" --megakernel > "$W/${v}_$r.log" 2>&1
    echo "== $v round $r rc=$?" | tee -a "$OUT/bench.log"
    grep -E "^(1|8) +[0-9]+ +(graph|mega)" "$W/${v}_$r.log" | tee -a "$OUT/bench.log"
  done
done
LOOM_BENCH_MEGA_SWEEPS=skip_math_b8 LOOM_BENCH_MEGA_TRACE="8,600,0;8,600,3" \
  timeout 120 build/bin/cuda_bench_v12 "$W/trace_v12.json" --megakernel > "$OUT/trace_v12.log" 2>&1
echo "== trace v12 rc=$?"; grep -E "^megakernel batch|^  [a-z]|\(batch|^ +[0-9]+: graph" "$OUT/trace_v12.log"
tar czf "$OUT/s59_2_json.tgz" -C "$W" .
