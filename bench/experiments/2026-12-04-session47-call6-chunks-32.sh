#!/bin/bash
# Session 47, call 6: 32 draw chunks a row with the drawn rows' blocks leaving at once (carry
# .device/s47b.txz, the tests pack of that tree, and .device/s46e.tgz, main's sampling build at
# 939e800). ctest -L cuda; the sampling check against main, alternated twice; then 256 x 22 FP8
# (the benchmark sampler on bf16 logits: predicted ~25 us a step less in the rest of the step,
# within the run-to-run noise of the tokens/s), with power and clocks.
python3 -c "import tarfile; tarfile.open('.device/s47b.txz').extractall()"
mkdir -p base && python3 -c "import tarfile; tarfile.open('.device/s46e.tgz').extractall('base')"
W=/tmp/s47_6; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
save() { tar czf "$OUT/s47_6.tgz" -C "$W" .; }
(cd build && timeout 220 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
tail -3 "$W/ctest.log"; save
OUT=$W/sampling BUILD=build BASE=base/build REPEATS=2 scripts/sampling_check.sh | tee "$W/sampling_table.txt"
save
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
echo "--- bench $(date +%s.%N)" >> "$W/smi_marks.txt"
timeout 170 build/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
  --batch-sizes 1 --num-jobs 256 --json "$W/b256.json" > "$W/b256.log" 2>&1
echo "b256 fp8 rc=$?"; grep -B2 -A2 -E '^ +jobs' "$W/b256.log" | cut -c1-200
echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
kill $SMI
python3 scripts/power_windows.py "$W/smi.csv" marks="$W/smi_marks.txt" | tee "$W/energy.txt"
save
