#!/bin/bash
# Session 45 call 4: main with block size 64 as the CUDA default (carry .device/s45b.txz,
# its tests pack). ctest -L cuda (now with the megakernel against the graph path at block size
# 64, and test_install checking that a cuda run without --block-size reports 64); 256 x 22 FP8
# with no --block-size (the default) and at --block-size 128 (larger blocks: one box a tile as
# at 64, half the block-table entries; predicted within noise of 64), with power and clocks.
python3 -c "import tarfile; tarfile.open('.device/s45b.txz').extractall()"
W=/tmp/s45_4; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
B=build/bin
save() { tar czf "$OUT/s45_4.tgz" -C "$W" .; }
(cd build && timeout 220 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
tail -3 "$W/ctest.log"; save
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
for bs in default 128; do
  opt=""; [ $bs = default ] || opt="--block-size $bs"
  echo "--- bench $bs $(date +%s.%N)" >> "$W/smi_marks.txt"
  timeout 170 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 $opt --json "$W/b256_$bs.json" > "$W/b256_$bs.log" 2>&1
  echo "b256 fp8 $bs rc=$? $(grep -A1 -E '^ +jobs' "$W/b256_$bs.log" | tail -1 | cut -c1-60)"
  echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
  python3 -c "import json,sys; print('kv block size', json.load(open(sys.argv[1]))['throughput'][0]['block_size'])" "$W/b256_$bs.json" 2>&1 | tail -1
  save
done
kill $SMI
python3 scripts/power_windows.py "$W/smi.csv" marks="$W/smi_marks.txt" | tee "$W/energy.txt"
save
