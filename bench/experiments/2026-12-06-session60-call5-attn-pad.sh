#!/bin/bash
# Session 60, call 5: attention's k and v rows padded by 16 bytes at 4-8 slots (branch
# attn-pad: unswizzled rows 128 bytes apart put the scores' 32 lanes on one bank group) against
# main 940200e, alternated twice after cuda_test_megakernel; the b8 attn_splits sweep on both.
# Predicted: b8 attention 19.4 -> ~15 us a layer along the chain, the b8 step -70..-110 us;
# b1 unchanged (same SASS). Packs: .device/s60p.txz (attn-pad, tests) and .device/s60n.txz
# (940200e, tests; unpacked into base/).
python3 -c "import tarfile; tarfile.open('.device/s60p.txz').extractall()"
mkdir -p base && (cd base && python3 -c "import tarfile; tarfile.open('../.device/s60n.txz').extractall()")
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
