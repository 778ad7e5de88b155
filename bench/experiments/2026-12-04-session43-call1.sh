#!/bin/bash
# Session 43, call 1 (~8 minutes; carry .device/tests43.txz: the test pack of this session's tree,
# extracts to build/; .device/tests.txz: e7ff97f's, extracted here under /tmp/base).
# The change: the e4m3 tiles convert a word's high byte pair in place (F2FP's .H1 operand) instead
# of shifting it down first, and V's two byte permutes a word become one (0x3120, then both
# halves converted): 32 + 32 of a 64-key tile's ~850 warp instructions (SASS of the FP8 config-0
# kernel: SHF.R.U32.HI 62 -> 30, PRMT 95 -> 63), the same bytes converted, so the same bits.
# Predicted from session 42's no-mask change (~35 instructions: 3.5% at full clock, +2.9% in the
# 256-job run under the cap): --attention-case 256 8000 4 fp8 ~268 -> ~255-260 us; 256 x 22 FP8
# +3-5% on one machine.
# 1. ctest -L cuda on the new tree (the attention tests compare every config and kernel bitwise).
# 2. --attention-case 256 8000 4 fp8, base (e7ff97f) and new alternated twice.
# 3. --step-case 256 8148 fp8 power on the new tree (joules a replay).
# 4. loom bench 256 x 22 FP8: new, base, nvidia-smi throughout.
python3 -c "import tarfile; tarfile.open('.device/tests43.txz').extractall(); tarfile.open('.device/tests.txz').extractall('/tmp/base')"
DST=$OUT; W=/tmp/s43c1; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
tail -4 "$W/ctest.log"
tar czf "$DST/s43c1.tgz" -C "$W" .
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
for r in 1 2; do
  for n in base new; do
    B=build/bin; [ $n = base ] && B=/tmp/base/build/bin
    timeout 60 $B/cuda_bench "$W/attn_${n}_r$r.json" --attention-case 256 8000 4 fp8 > "$W/attn_${n}_r$r.log" 2>&1
    echo "attention case $n r$r: $(grep -E 'TMA config 0 ' "$W/attn_${n}_r$r.log")"
  done
done
timeout 120 build/bin/cuda_bench "$W/power_new.json" --step-case 256 8148 fp8 power > "$W/power_new.log" 2>&1
echo "step case rc=$?"; grep -E 'power window' "$W/power_new.log"
tar czf "$DST/s43c1.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
i=0
for n in new base; do
  i=$((i + 1)); B=build/bin; [ $n = base ] && B=/tmp/base/build/bin
  echo "--- bench ${n}$i $(date +%s.%N)" >> "$W/smi_marks.txt"
  timeout 170 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256_${n}$i.json" > "$W/b256_${n}$i.log" 2>&1
  echo "b256 fp8 $n$i rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_${n}$i.log" | tail -1 | cut -c1-60
  tar czf "$DST/s43c1.tgz" -C "$W" .
done
echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
kill $SMI
python3 scripts/power_windows.py "$W/smi.csv" new="$W/power_new.json" marks="$W/smi_marks.txt" |
  tee "$W/energy.txt"
tar czf "$DST/s43c1.tgz" -C "$W" .
