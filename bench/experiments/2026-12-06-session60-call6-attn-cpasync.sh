#!/bin/bash
# Session 60, call 6: attention's K/V staged by cp.async at 4-8 slots (branch attn-cpasync: one
# L2 round trip, was two of 16-byte loads four at a time) against main f9efeed, alternated
# twice after cuda_test_megakernel; the b8 attn_splits sweep on both.
# Predicted: b8 -20..-35 us a step (one round trip a layer on the chain); b1 unchanged (same
# SASS). Packs: .device/s60c.txz (attn-cpasync, tests), .device/s60p.txz (main; into base/).
python3 -c "import tarfile; tarfile.open('.device/s60c.txz').extractall()"
mkdir -p base && (cd base && python3 -c "import tarfile; tarfile.open('../.device/s60p.txz').extractall()")
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 150 build/bin/cuda_test_megakernel > "$OUT/test.log" 2>&1
echo "test rc=$?"; grep -E "ERROR|error|assertions|Status" "$OUT/test.log" | head
for r in 1 2; do
  for v in base new; do
    bin=build/bin/cuda_bench
    [ $v = base ] && bin=base/build/bin/cuda_bench
    echo "== $v round $r" >> "$OUT/all.log"
    LOOM_BENCH_MEGA_SWEEPS=attn_splits_b8 timeout 110 $bin "$OUT/${v}_$r.json" --megakernel >> "$OUT/all.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -A12 "== $v round $r" "$OUT/all.log" | grep -E "^(1|8) .*mega"
    grep -A5 "splits a (slot, KV head) (batch 8" "$OUT/all.log" | tail -4
  done
done
