#!/bin/bash
# Session 54, call 2 (~8 minutes, H100): issue 13's H100 figure, 256 jobs x 22 frames (3 context
# frames) with FP8 KV (>= 24,000 tokens/s, every job admitted without preemption), last measured
# 23,782 on 2026-11-28 (no H100 lent since); batch 1 and 8 on the graph path with bench's
# s/frame as session 53 defined it (prefill left out), and the megakernel beside them; and
# test_install, whose --backend auto case session 53 changed (call 1 on a GPU machine failed it:
# the test expected the cpu fallback beside a GPU). nvidia-smi logs power and clocks.
# Carry .device/s54.txz (main 7194953's build).
python3 -c "import tarfile; tarfile.open('.device/s54.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 60 ctest -R test_install --output-on-failure > "$OUT/ctest_install.log" 2>&1
 echo "ctest rc=$?" >> "$OUT/ctest_install.log"); tail -3 "$OUT/ctest_install.log"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > "$OUT/ckpt.log" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 200 > "$OUT/smi.csv" 2>&1 &
SMI=$!
echo "--- fp8 $(date +%s.%N)" >> "$OUT/smi_marks.txt"
timeout 260 build/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
  --batch-sizes 1 --num-jobs 256 --json "$OUT/b256_fp8.json" > "$OUT/b256_fp8.log" 2>&1
echo "b256 fp8 rc=$?"; tail -12 "$OUT/b256_fp8.log"
echo "--- end $(date +%s.%N)" >> "$OUT/smi_marks.txt"
for m in graph mega; do
  extra=; [ $m = mega ] && extra=--megakernel
  timeout 100 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,8 $extra --json "$OUT/b18_$m.json" > "$OUT/b18_$m.log" 2>&1
  echo "b1,8 $m rc=$?"; tail -4 "$OUT/b18_$m.log"
done
kill $SMI
python3 scripts/power_windows.py "$OUT/smi.csv" marks="$OUT/smi_marks.txt" > "$OUT/energy.txt" 2>&1
cat "$OUT/energy.txt"
