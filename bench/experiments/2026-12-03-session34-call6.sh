#!/bin/bash
# Session 34, call 6 (~4 minutes): `ctest -L cuda` on main after rope_kv_write's change (the
# angles' cos and sin once a frequency, before the wait; same bits), then loom bench b4 and b8
# (the TMA path, where rope_kv_write runs between qkv and attention), bf16 twice and FP8 once,
# against the tree before it. Predicted: b4/b8 -0.3 to -1%.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom" -o .device/old.txz \
#     old=bench/experiments/2026-12-03-rope-kv-write-before-cs-ahead.patch
#   cp this file .device/run.sh; carry .device/base.txz, .device/old.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall(); tarfile.open('.device/old.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s34c6; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s34c6.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for v in old new; do
  b=build/bin; [ $v = old ] && b=.device/old/bin
  kv=""; n=bf16; [ $r = 3 ] && kv="--kv-dtype fp8" && n=fp8
  $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 4,8 $kv \
    --json "$OUT/bench_${v}_${n}_$r.json" > "$OUT/bench_${v}_${n}_$r.log" 2>&1
  echo "$v $n r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_${n}_$r.log" | tr -s ' '
done; tar czf "$FINAL/s34c6.tgz" -C "$OUT" .; done
