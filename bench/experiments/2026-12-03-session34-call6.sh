#!/bin/bash
# Session 34, call 6 (~5 minutes): `ctest -L cuda` on main after rope_kv_write's change (the
# angles' cos and sin once a frequency, before the wait; same bits), then loom bench b4 and b8
# (the TMA path, where rope_kv_write runs between qkv and attention), twice,
# against the tree before it. Predicted: b4/b8 -0.3 to -1%. With it, a variant of the split
# decode kernel (sx, bench/experiments/2026-12-03-attention-split-rope-cs-shuffled.patch): lane j
# computes angle j's sincosf and the others are shuffled from it (1 sincosf a lane before the
# wait instead of 9; the probe of call 5 showed the late blocks' waits 2.6 us behind the first);
# its attention, backend and rope tests, then b1/b2 against main. Predicted: b1 -0.5 to -1.5%.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom" -o .device/old.txz \
#     old=bench/experiments/2026-12-03-rope-kv-write-before-cs-ahead.patch
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend \
#     cuda_test_rope_attention" -o .device/sx.txz \
#     sx=bench/experiments/2026-12-03-attention-split-rope-cs-shuffled.patch
#   cp this file .device/run.sh; carry .device/{base,old,sx}.txz and .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'old', 'sx')]"
FINAL=$OUT; OUT=/tmp/s34c6; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s34c6.tgz" -C "$OUT" .
for t in cuda_test_attention cuda_test_cuda_backend cuda_test_rope_attention; do
  timeout 150 .device/sx/bin/$t > "$OUT/test_sx_$t.log" 2>&1
  echo "sx $t rc=$? $(grep -E 'assertions' "$OUT/test_sx_$t.log" | tr -s ' ')"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in old:4,8 new:1,2,4,8 sx:1,2; do
  n=${v%:*}; bs=${v#*:}
  b=build/bin; [ $n != new ] && b=.device/$n/bin
  $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes $bs \
    --json "$OUT/bench_${n}_$r.json" > "$OUT/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${n}_$r.log" | tr -s ' '
done; tar czf "$FINAL/s34c6.tgz" -C "$OUT" .; done
