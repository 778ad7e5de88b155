#!/bin/bash
# Session 43, call 2 (~5 minutes; carry as call 1). Call 1: attention case at full clock base
# 269.35 / 269.28 us, new 270.65 / 269.61 (no gain); 256 x 22 FP8 new 30,989 (1,800 MHz under the
# cap), base 30,541 (1,815 MHz). The second round, the other order: base's step case power
# (joules a replay beside call 1's new: 5.43 J whole, 4.01 attention), then bench base, new.
python3 -c "import tarfile; tarfile.open('.device/tests43.txz').extractall(); tarfile.open('.device/tests.txz').extractall('/tmp/base')"
DST=$OUT; W=/tmp/s43c2; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
timeout 120 /tmp/base/build/bin/cuda_bench "$W/power_base.json" --step-case 256 8148 fp8 power > "$W/power_base.log" 2>&1
echo "step case rc=$?"; grep -E 'power window' "$W/power_base.log"
tar czf "$DST/s43c2.tgz" -C "$W" .
[ -d /tmp/terra ] || python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
i=2
for n in base new; do
  i=$((i + 1)); B=build/bin; [ $n = base ] && B=/tmp/base/build/bin
  echo "--- bench ${n}$i $(date +%s.%N)" >> "$W/smi_marks.txt"
  timeout 170 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256_${n}$i.json" > "$W/b256_${n}$i.log" 2>&1
  echo "b256 fp8 $n$i rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_${n}$i.log" | tail -1 | cut -c1-60
  tar czf "$DST/s43c2.tgz" -C "$W" .
done
echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
kill $SMI
python3 scripts/power_windows.py "$W/smi.csv" base="$W/power_base.json" marks="$W/smi_marks.txt" |
  tee "$W/energy.txt"
tar czf "$DST/s43c2.tgz" -C "$W" .
