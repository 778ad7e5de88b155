#!/bin/bash
# Session 34, call 4 (~5 minutes). The clusters of call 3 were slower (b1 0.713 -> 0.839 at 16,
# 0.880 at 8: blocks of a cluster are gang-scheduled and two partitions a block run in turn).
# Call 3's partition probe: wait -> warp 0's tile in 2.8-3.0 us (q's load, RoPE's sincos of 16
# angles a lane, the tiles), tile computed -> partial done 1.6 us. Main now (the commit before
# this script) computes RoPE's cos and sin before griddepcontrol.wait (they depend on the
# position and the frequencies only) and folds a partition's 4 tiles by (row, 8 dims) items
# (merge_partial: one set of weights for 8 dims; 64 items at G 8, D 64, one a thread, against
# 4 (row, dim) items a thread in turn). Same merges, same bits; ptxas 149 registers as before.
# Predicted: -0.5 to -1.5 us a layer at b1/b2, b1 -1 to -3%.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom cuda_bench" -o .device/old.txz \
#     old=bench/experiments/2026-12-03-attention-split-before-rope-ahead.patch
#   cp this file .device/run.sh; carry .device/base.txz, .device/old.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall(); tarfile.open('.device/old.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s34c4; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s34c4.tgz" -C "$OUT" .
for v in old new; do
  b=build/bin; [ $v = old ] && b=.device/old/bin
  timeout 100 $b/cuda_bench "$OUT/step_$v.json" --step-case 1 600,2000,6000 > "$OUT/step_$v.log" 2>&1
  echo "step $v rc=$?"; grep -E "without (nothing|attention )" "$OUT/step_$v.log"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for v in old new; do
  b=build/bin; [ $v = old ] && b=.device/old/bin
  $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; tar czf "$FINAL/s34c4.tgz" -C "$OUT" .; done
