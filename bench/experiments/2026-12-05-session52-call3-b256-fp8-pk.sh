#!/bin/bash
# Session 52, call 3 (~7 minutes). First batch 1 and 8 with --megakernel (the graph path's rows
# are call 2's; the megakernel was last measured in session 12, 0.982 against 0.833 s/frame):
# where issue 15's required design stands against today's graphs. Then the 256 x 22 FP8
# headline (issue 13, >= 32,000 tokens/s) on today's main (pk kept: the benchmark sampler's
# temperature draw over bf16 logits 194 -> 168 us at 256 rows, ~0.3% of an ~8 ms step), then
# session 48's main (.device/new.tgz) in the same call, nvidia-smi logging power and clocks (the
# run is bound by the 700 W cap). Carry .device/s52.txz (main's GPU code with pk) and
# .device/new.tgz. Predicted: main +0.2-0.4% over base.
python3 -c "
import tarfile
tarfile.open('.device/s52.txz').extractall()
tarfile.open('.device/new.tgz').extractall('b')"
W=/tmp/s52_3; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > "$W/ckpt.log" 2>&1
timeout 120 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1,8 --megakernel --json "$W/b18_mega.json" > "$W/b18_mega.log" 2>&1
echo "mega rc=$?"; tail -3 "$W/b18_mega.log"
tar czf "$OUT/s52_3.tgz" -C "$W" .
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
for v in main base; do
  bin=build/bin/loom; [ $v = base ] && bin=b/new/build/bin/loom
  echo "--- $v $(date +%s.%N)" >> "$W/smi_marks.txt"
  timeout 200 $bin bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256_$v.json" > "$W/b256_$v.log" 2>&1
  echo "b256 fp8 $v rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_$v.log" | tail -1 | cut -c1-70
  echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
  tar czf "$OUT/s52_3.tgz" -C "$W" .
done
kill $SMI
python3 scripts/power_windows.py "$W/smi.csv" marks="$W/smi_marks.txt" > "$W/energy.txt" 2>&1
cat "$W/energy.txt"
tar czf "$OUT/s52_3.tgz" -C "$W" .
