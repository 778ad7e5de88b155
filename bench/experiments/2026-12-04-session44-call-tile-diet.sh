#!/bin/bash
# Prepared in session 43 for session 44: `bash THIS A`, `… B`, then `… C` and `… D` if device
# time allows (~9 minutes each; C and D ~7). Carry .device/tests43b.txz (b905150's test pack: the same
# kernels as HEAD at c74b1ac and later), .device/lo8.txz and .device/diet.txz: test packs of HEAD
# with bench/experiments/2026-12-04-tma-lane-offsets-held.patch (lo8) and with
# 2026-12-04-tma-tile-diet.patch (diet: lo8, the tile loop unrolled by 2 and the bf16 fragments
# in mma order). If lost, build each tree and `scripts/pack_device.sh tests build .device/N.txz`.
# Session 43 measured ~2.3 mJ a step per SASS instruction removed from the FP8 tile under the
# 700 W cap (64 instructions: +1.5-2.0% on 256 x 22 FP8, nothing at full clock). lo8 removes 36
# more a tile, diet 66 from the FP8 tile and 165 from the bf16 one; the same bits (ctest).
# Predicted: 256 x 22 FP8 lo8 ~+0.8%, diet ~+1.5% (diet could lose to the instruction cache);
# the bf16 shared-group run (L2-bound one-stage kernel, 1,387 -> 1,216 instructions a tile)
# faster, so the sharing ratio above its 1.140-1.151x; b8 bf16 a little faster.
# A: ctest -L cuda on diet; 256 x 22 FP8 base, diet, lo8.
# B: lo8's attention tests; --attention-case 256 8000 4 fp8 and bf16 on base and diet;
#    256 x 22 FP8 lo8, diet, base.
# C: 256 x 22 bf16 --shared-group 8 (unshared and shared passes) on diet; bf16 b1 / b8 diet, base.
#    C alone gives diet's sharing ratio (issue 13's >= 1.15x is shared over unshared in one run).
# D: the same pair on base (the base's ratio on the same machine), if time allows.
CALL=${1:-A}
python3 - <<'PY'
import tarfile
for n in ('tests43b', 'lo8', 'diet'):
    tarfile.open(f'.device/{n}.txz').extractall(f'/tmp/{n}')
PY
DST=$OUT; W=/tmp/s44$CALL; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
bin() { [ $1 = base ] && echo /tmp/tests43b/build/bin || echo /tmp/$1/build/bin; }
save() { tar czf "$DST/s44$CALL.tgz" -C "$W" .; }
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
if [ "$CALL" = C ] || [ "$CALL" = D ]; then
  n=diet; [ "$CALL" = D ] && n=base
  timeout 380 $(bin $n)/loom bench --model /tmp/terra --frames 22 --context-frames 3 --batch-sizes 1 \
    --num-jobs 256 --shared-group 8 --json "$W/shared_$n.json" > "$W/shared_$n.log" 2>&1
  echo "shared $n rc=$?"; grep -A3 -E '^ +jobs' "$W/shared_$n.log" | cut -c1-60
  save
  for m in diet base; do
    [ "$CALL" = D ] && [ $m = diet ] && continue
    timeout 100 $(bin $m)/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,8 \
      --json "$W/b18_$m.json" > "$W/b18_$m.log" 2>&1
    echo "$m b1/b8 rc=$? $(grep -E '^ +[0-9]+ ' "$W/b18_$m.log" | tr -s ' ' | cut -c1-32 | tr '\n' '|')"
    save
  done
  exit 0
fi
if [ "$CALL" = A ]; then
  rm -rf build && cp -r /tmp/diet/build build  # ctest runs from build/ (paths under /work/main)
  (cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest_diet.log" 2>&1
   echo "ctest rc=$?" >> "$W/ctest_diet.log")
  tail -3 "$W/ctest_diet.log"
  ORDER="base diet lo8"
else
  for t in cuda_test_attention cuda_test_attention_shared cuda_test_batch_invariance cuda_test_rope_attention cuda_test_kv_fp8; do
    timeout 100 /tmp/lo8/build/bin/$t > "$W/lo8_$t.log" 2>&1
    echo "lo8 $t rc=$? $(grep -E 'assertions' "$W/lo8_$t.log" | tr -s ' ')"
  done
  for d in fp8 bf16; do
    for n in base diet; do
      timeout 60 $(bin $n)/cuda_bench "$W/attn_${d}_$n.json" --attention-case 256 8000 4 $d \
        > "$W/attn_${d}_$n.log" 2>&1
      echo "attention case $d $n: $(grep -E 'TMA config 0 ' "$W/attn_${d}_$n.log")"
    done
  done
  ORDER="lo8 diet base"
fi
save
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
for n in $ORDER; do
  echo "--- bench $n $(date +%s.%N)" >> "$W/smi_marks.txt"
  timeout 170 $(bin $n)/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256_$n.json" > "$W/b256_$n.log" 2>&1
  echo "b256 fp8 $n rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_$n.log" | tail -1 | cut -c1-60
  echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
  python3 scripts/power_windows.py "$W/smi.csv" marks="$W/smi_marks.txt" > "$W/energy.txt"
  save
done
kill $SMI
cat "$W/energy.txt"
