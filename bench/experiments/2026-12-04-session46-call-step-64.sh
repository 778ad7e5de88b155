#!/bin/bash
# Session 46: `bash THIS 1`, then `… 2` (carry .device/s46.txz, a tests pack of main at this
# script's commit or later: rm -f build/bin/cuda_test_shared_plan &&
# scripts/pack_device.sh tests build .device/s46.txz).
# Questions:
# 1. Where a 256-row FP8 decode step's joules go at block size 64, the new CUDA default
#    (`cuda_bench --step-case 256 8148 fp8 power`, now at the backend's default block size, with
#    a window without lm_head + draw): session 41's split at 16 was ~5.6 J a step, ~4.25 J of it
#    attention. If lm_head + draw take >= 0.4 J (>= 7%), they are the next lever.
# 2. Whether another cuBLASLt algorithm spends fewer joules a replay than cuBLAS's default on the
#    256-row layer GEMMs and lm_head (`cuda_bench --gemm-energy-case 256`, NVML's counter): the
#    time searches found nothing faster; >= 5% fewer joules at about the same time on a shape
#    would be worth ~0.5-1.5% of the 256 x 22 run under the cap.
# 3. Block size 64 against 16 on a third machine, both orders (session 45: +2.0% both orders on
#    one machine, +0.75% in one order on another).
# Call 1 (~7 min): ctest -L cuda; the GEMM energy case; the step case with power.
# Call 2 (~5 min; carry .device/s46b.txz, a run pack of the commit after call 1, whose lm_head
# shape is the step's padded vocabulary): lm_head's energy case; 256 x 22 FP8 at the default,
# then 16.
CALL=${1:-1}
PACK=.device/s46.txz; [ "$CALL" = 2 ] && PACK=.device/s46b.txz
python3 -c "import tarfile; tarfile.open('$PACK').extractall()"
W=/tmp/s46_$CALL; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
B=build/bin
save() { tar czf "$OUT/s46_$CALL.tgz" -C "$W" .; }
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
if [ "$CALL" = 1 ]; then
  (cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
  tail -3 "$W/ctest.log"; save
  timeout 200 $B/cuda_bench "$W/gemm_energy.json" --gemm-energy-case 256 > "$W/gemm_energy.log" 2>&1
  echo "gemm energy rc=$?"; grep -E '^[a-z_]+ +candidate|^ +(default|algo)' "$W/gemm_energy.log" | cut -c1-150
  save
  timeout 150 $B/cuda_bench "$W/step.json" --step-case 256 8148 fp8 power > "$W/step.log" 2>&1
  echo "step case rc=$?"; grep -E 'power window|without (nothing|attention|all but|lm_head)' "$W/step.log" | head -12
  save
else
  timeout 60 $B/cuda_bench "$W/gemm_energy.json" --gemm-energy-case 256 lm_head > "$W/gemm_energy.log" 2>&1
  echo "gemm energy rc=$?"; grep -E '^[a-z_]+ +candidate|^ +(default|algo)' "$W/gemm_energy.log" | cut -c1-150
  python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
  for bs in default 16; do
    opt=""; [ $bs = default ] || opt="--block-size $bs"
    echo "--- bench $bs $(date +%s.%N)" >> "$W/smi_marks.txt"
    timeout 170 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
      --batch-sizes 1 --num-jobs 256 $opt --json "$W/b256_$bs.json" > "$W/b256_$bs.log" 2>&1
    echo "b256 fp8 $bs rc=$? $(grep -A1 -E '^ +jobs' "$W/b256_$bs.log" | tail -1 | cut -c1-60)"
    echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
    save
  done
fi
kill $SMI
python3 scripts/power_windows.py "$W/smi.csv" \
  $([ -f "$W/smi_marks.txt" ] && echo marks="$W/smi_marks.txt") \
  $([ -f "$W/step.json" ] && echo step="$W/step.json") \
  $([ -f "$W/gemm_energy.json" ] && echo gemm="$W/gemm_energy.json") | tee "$W/energy.txt"
save
