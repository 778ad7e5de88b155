#!/bin/bash
# Session 41, call 5 (~6 minutes; carry .device/tests.txz: HEAD's test pack, extracts to build/;
# .device/base.txz: main 28230c6's run pack, extracts to .device/main/bin).
# 1. ctest -L cuda on HEAD (cuda_test_attention now also runs block size 128: the TMA kernel's
#    64 | bs path of the tile-ahead lookup).
# 2. 256 x 22 FP8, the second round of call 4's pair in the other order: HEAD, then 28230c6.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('tests', 'base')]"
DST=$OUT; W=/tmp/s41c5; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
tail -3 "$W/ctest.log"; grep -E "assertions" "$W/ctest.log" | head -3
tar czf "$DST/s41c5.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 500 > "$W/smi.csv" 2>&1 &
SMI=$!
for n in new main; do
  B=build/bin; [ $n = main ] && B=.device/main/bin
  timeout 200 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256_${n}_fp8.json" > "$W/b256_${n}_fp8.log" 2>&1
  echo "b256 fp8 $n rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_${n}_fp8.log" | tail -1 | cut -c1-60; grep 'replayed' "$W/b256_${n}_fp8.log"
  tar czf "$DST/s41c5.tgz" -C "$W" .
done
kill $SMI
tar czf "$DST/s41c5.tgz" -C "$W" .
