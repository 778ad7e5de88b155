#!/bin/bash
# Session 74, call 1: one machine start, a question for whichever GPU comes.
# - An H200: session 73's call (bench/experiments/2026-12-07-session73-call1.sh, its H200 branch):
#   ctest -L cuda on main, then issue 13's FP8 256 x 22 row for main against 233d877, main at
#   --max-batch-slots 16384 and main again while the call has time.
# - An H100: the 16,384-slot budget against today's 8,192 on main, FP8 256 x 22, alternated
#   (8192, 16384, 8192, then 16384 again while the call has time, ~135 s a run). Session 71 measured
#   +0.2% (25,483 against 25,438, one run each), within a run's spread; a default changes only
#   on a repeat that holds in both orders.
# Both branches sample SM clock and power every 500 ms into smi.csv; everything comes back as
# $OUT/s74.tgz (a call returns at most 8 files).
# carry: [".device/m73.txz", ".device/m71.txz"]
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash bench/experiments/2026-12-07-session73-call1.sh
  exit
fi
. scripts/device_env.sh
D=/tmp/s74; mkdir -p $D
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$D/device.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 \
  > "$D/smi.csv" 2>&1 &
smi=$!
unpack_pack .device/m73.txz .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in s8k s16k s8k2 s16k2; do
  extra=
  case $v in s16k*) extra="--max-batch-slots 16384" ;; esac
  [ $v = s16k2 ] && [ $SECONDS -ge "${LAST_START:-420}" ] && continue
  log=$D/b256_fp8_$v
  echo "$v starts at ${SECONDS}s" >> "$D/marks.txt"
  timeout 170 build/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 \
    --context-frames 3 --batch-sizes 1 --num-jobs 256 $extra --json "$log.json" > "$log.log" 2>&1
  echo "$v rc=$? at ${SECONDS}s" | tee -a "$D/marks.txt"
  grep -E "^ +256 |steps:" "$log.log" | tail -2
  tar czf "$OUT/s74.tgz" -C /tmp s74  # what ran so far, should the call be cut short
done
kill $smi 2>/dev/null
tar czf "$OUT/s74.tgz" -C /tmp s74
