#!/bin/bash
# Prepared in session 43 for session 44: two calls, `bash THIS A` then `bash THIS B` (~9 and ~8
# minutes). Carry .device/tests43b.txz (b905150's test pack: the same kernels as HEAD), and
# .device/lo8.txz and .device/lo8u2.txz: test packs of HEAD with
# bench/experiments/2026-12-04-tma-lane-offsets-held.patch (lo8), and with
# 2026-12-04-tma-lane-offsets-unroll2.patch (lo8u2: the same plus the tile loop unrolled by 2).
# If lost, build each tree and run `scripts/pack_device.sh tests build .device/NAME.txz`.
# Session 43 measured ~2.3 mJ a step per SASS instruction removed from the FP8 tile under the
# 700 W cap (64 instructions: +1.5-2.0% on 256 x 22 FP8, nothing at full clock). These remove
# 36 (lo8) and 66 (lo8u2) more, the same bits. Predicted: lo8 ~+0.8%, lo8u2 ~+1.5% on the
# 256-job FP8 run; nothing at full clock; lo8u2 could lose it to the instruction cache.
# A: ctest -L cuda on lo8u2; --attention-case 256 8000 4 fp8 on base, lo8, lo8u2; 256 x 22 FP8
#    base, lo8u2, lo8.   B: lo8's attention tests; 256 x 22 FP8 lo8, lo8u2, base.
CALL=${1:-A}
python3 - <<'PY'
import tarfile
for n in ('tests43b', 'lo8', 'lo8u2'):
    tarfile.open(f'.device/{n}.txz').extractall(f'/tmp/{n}')
PY
DST=$OUT; W=/tmp/s44$CALL; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
bin() { [ $1 = base ] && echo /tmp/tests43b/build/bin || echo /tmp/$1/build/bin; }
if [ "$CALL" = A ]; then
  rm -rf build && cp -r /tmp/lo8u2/build build  # ctest runs from build/ (paths under /work/main)
  (cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest_lo8u2.log" 2>&1
   echo "ctest rc=$?" >> "$W/ctest_lo8u2.log")
  tail -3 "$W/ctest_lo8u2.log"
  for n in base lo8 lo8u2; do
    timeout 60 $(bin $n)/cuda_bench "$W/attn_$n.json" --attention-case 256 8000 4 fp8 > "$W/attn_$n.log" 2>&1
    echo "attention case $n: $(grep -E 'TMA config 0 ' "$W/attn_$n.log")"
  done
  ORDER="base lo8u2 lo8"
else
  for t in cuda_test_attention cuda_test_attention_shared cuda_test_batch_invariance cuda_test_rope_attention cuda_test_kv_fp8; do
    timeout 100 /tmp/lo8/build/bin/$t > "$W/lo8_$t.log" 2>&1
    echo "lo8 $t rc=$? $(grep -E 'assertions' "$W/lo8_$t.log" | tr -s ' ')"
  done
  ORDER="lo8 lo8u2 base"
fi
tar czf "$DST/s44$CALL.tgz" -C "$W" .
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for n in $ORDER; do
  echo "--- bench $n $(date +%s.%N)" >> "$W/smi_marks.txt"
  timeout 170 $(bin $n)/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256_$n.json" > "$W/b256_$n.log" 2>&1
  echo "b256 fp8 $n rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_$n.log" | tail -1 | cut -c1-60
  echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
  python3 scripts/power_windows.py "$W/smi.csv" marks="$W/smi_marks.txt" > "$W/energy.txt"
  tar czf "$DST/s44$CALL.tgz" -C "$W" .
done
kill $SMI
cat "$W/energy.txt"
