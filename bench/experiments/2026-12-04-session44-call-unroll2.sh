#!/bin/bash
# Prepared in session 43 for session 44 (~9 minutes; carry .device/unroll2.txz, the test pack of
# HEAD + bench/experiments/2026-12-04-tma-tile-loop-unroll2.patch, extracts to build/; and
# .device/tests43b.txz, b905150's test pack (the same kernels as HEAD), extracted under /tmp/base).
# If the packs are lost: build HEAD with the patch applied and run
# `scripts/pack_device.sh tests build .device/unroll2.txz`, then HEAD alone into tests43b.txz.
# The change: the TMA decode kernel's tile loop unrolled by 2 (-42 SASS instructions a tile in the
# FP8 config-0 kernel, ten of them register moves). Predicted: ~+1% on 256 x 22 FP8 under the
# 700 W cap, no change at full clock; the risk is the instruction cache.
# 1. ctest -L cuda on the unrolled tree.
# 2. --attention-case 256 8000 4 fp8, base and new alternated twice; bf16 once each.
# 3. loom bench 256 x 22 FP8: new, base, new, nvidia-smi throughout.
python3 -c "import tarfile; tarfile.open('.device/unroll2.txz').extractall(); tarfile.open('.device/tests43b.txz').extractall('/tmp/base')"
DST=$OUT; W=/tmp/s44u; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
tail -4 "$W/ctest.log"
tar czf "$DST/s44u.tgz" -C "$W" .
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
for c in "fp8 1" "fp8 2" "bf16 1"; do
  set -- $c
  for n in base new; do
    B=build/bin; [ $n = base ] && B=/tmp/base/build/bin
    timeout 60 $B/cuda_bench "$W/attn_$1_${n}_r$2.json" --attention-case 256 8000 4 $1 \
      > "$W/attn_$1_${n}_r$2.log" 2>&1
    echo "attention case $1 $n r$2: $(grep -E 'TMA config 0 ' "$W/attn_$1_${n}_r$2.log")"
  done
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
i=0
for n in new base new; do
  i=$((i + 1)); B=build/bin; [ $n = base ] && B=/tmp/base/build/bin
  echo "--- bench ${n}$i $(date +%s.%N)" >> "$W/smi_marks.txt"
  timeout 170 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256_${n}$i.json" > "$W/b256_${n}$i.log" 2>&1
  echo "b256 fp8 $n$i rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_${n}$i.log" | tail -1 | cut -c1-60
  echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
  python3 scripts/power_windows.py "$W/smi.csv" marks="$W/smi_marks.txt" > "$W/energy.txt"
  tar czf "$DST/s44u.tgz" -C "$W" .
done
kill $SMI
cat "$W/energy.txt"
