#!/bin/bash
# Session 41, call 2 (~6 minutes; carry .device/s41.txz: main 28230c6's run pack plus cuda_bench
# with `--step-case … scatter`, extracts to build/bin).
# Why does the 256 x 22 FP8 run's decode graph take 8.82 ms a step on the device (session 40)
# where `--step-case 256 8000 fp8` replays 7.82? Three readings, measured here:
# 1. block placement: the run's sequences get their decode blocks in turn (block j of sequence s
#    near j*256 + s), the step case side by side (session 12's attention alone: +4% scattered);
# 2. the run's mean context is 3*582 + 11*582 = 8,148 slots, not 8,000 (+2% of attention);
# 3. the GPU's clocks or power over a 2-minute run (nvidia-smi sampled every 500 ms throughout).
python3 -c "import tarfile; tarfile.open('.device/s41.txz').extractall()"
DST=$OUT; W=/tmp/s41c2; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 500 > "$W/smi.csv" 2>&1 &
SMI=$!
B=build/bin
for m in contig scatter; do
  extra=""; [ $m = scatter ] && extra=scatter
  echo "--- step case $m $(date +%T)" >> "$W/smi_marks.txt"
  timeout 150 $B/cuda_bench "$W/step_${m}.json" --step-case 256 8148 fp8 $extra > "$W/step_${m}.log" 2>&1
  echo "step case $m rc=$?"; grep -E 'without (nothing|attention|all but attention) |action slots' "$W/step_${m}.log" | head -6
  tar czf "$DST/s41c2.tgz" -C "$W" .
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
echo "--- bench 256x22 fp8 $(date +%T)" >> "$W/smi_marks.txt"
timeout 250 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
  --batch-sizes 1 --num-jobs 256 --json "$W/b256_fp8.json" > "$W/b256_fp8.log" 2>&1
echo "b256 fp8 rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_fp8.log" | tail -1; grep 'replayed' "$W/b256_fp8.log"
echo "--- end $(date +%T)" >> "$W/smi_marks.txt"
kill $SMI
python3 - "$W/smi.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) >= 6 and 'MHz' in r[1]]
sm = [int(r[1].split()[0]) for r in rows]; pw = [float(r[3].split()[0]) for r in rows]
print(f"smi samples {len(rows)}: sm MHz min {min(sm)} median {sorted(sm)[len(sm)//2]} max {max(sm)}; "
      f"power W max {max(pw):.0f}; throttle reasons seen {sorted(set(r[5].strip() for r in rows))}")
PY
tar czf "$DST/s41c2.tgz" -C "$W" .
