#!/bin/bash
# Session 54, call 3 (~9 minutes): (1) cuda_bench --megakernel with the raw timeline of one
# traced step (every CTA's instructions: start, wait, staged, end) at batch 1 ctx 600, for the
# critical-path analysis of a layer (scripts/mega_timeline.py): call 1's means say a layer's
# ops take ~63 us along the chain on the H100 for ~29.5 us of bytes, and that no-math-no-waits
# runs are still 1.29x the floor; which hops make that up is the question. (2) On an H100:
# issue 13's H100 figure, 256 x 22 FP8 (>= 24,000 tokens/s, no preemption; 23,782 on
# 2026-11-28), then batch 1 and 8, graph and megakernel, bench's s/frame without prefill.
# (3) test_install with session 54's fix. Carry .device/s54b.txz (main + the timeline dump).
python3 -c "import tarfile; tarfile.open('.device/s54b.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 60 ctest -R test_install --output-on-failure > "$OUT/ctest_install.log" 2>&1
 echo "ctest rc=$?" >> "$OUT/ctest_install.log"); tail -3 "$OUT/ctest_install.log"
timeout 200 build/bin/cuda_bench "$OUT/mega_timeline.json" --megakernel > "$OUT/mega_timeline.log" 2>&1
echo "trace rc=$?"; grep -E "^1 |^8 " "$OUT/mega_timeline.log"
python3 scripts/mega_timeline.py "$OUT/mega_timeline.json" > "$OUT/mega_timeline_analysis.txt" 2>&1
cat "$OUT/mega_timeline_analysis.txt"
nvidia-smi -L | grep -q H100 || exit 0
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > "$OUT/ckpt.log" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 200 > "$OUT/smi.csv" 2>&1 &
SMI=$!
echo "--- fp8 $(date +%s.%N)" >> "$OUT/smi_marks.txt"
timeout 230 build/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
  --batch-sizes 1 --num-jobs 256 --json "$OUT/b256_fp8.json" > "$OUT/b256_fp8.log" 2>&1
echo "b256 fp8 rc=$?"; tail -8 "$OUT/b256_fp8.log"
echo "--- end $(date +%s.%N)" >> "$OUT/smi_marks.txt"
kill $SMI
python3 scripts/power_windows.py "$OUT/smi.csv" marks="$OUT/smi_marks.txt" > "$OUT/energy.txt" 2>&1
cat "$OUT/energy.txt"
timeout 80 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1,8 --json "$OUT/b18_graph.json" > "$OUT/b18_graph.log" 2>&1
echo "b1,8 graph rc=$?"; tail -4 "$OUT/b18_graph.log"
