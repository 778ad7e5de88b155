#!/bin/bash
# Session 32's sixth device call (~3 minutes): `ctest -L cuda` on the staged fold (the decode
# kernel's last block copies every partial to shared memory in one round of cp.async before
# the same merges), then loom bench at batch 1 and 2 (the split decode kernel) against
# 324cd03's binary, two rounds. Predicted from call 5's timeline: the fold ~6 -> ~2 us a layer
# at 25 partitions, ~2 us less at the bench's mean context: batch 1 -2 to -4%, batch 2 alike.
# Build here first: make -C build -j && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz (the new tree); .device/old.txz is
#   324cd03's tests pack (copied from session 32's call 3 base.txz); cp this file .device/run.sh
# carry .device/base.txz, .device/old.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/old.txz').extractall()"
mkdir -p /tmp/old && cp -r build/bin/loom build/bin/libloom-cuda.so build/bin/libsimdjson.so.14 build/bin/models /tmp/old/
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s32c6; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 150 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s32c6.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in old new; do
  L=build/bin/loom; [ $v = old ] && L=/tmp/old/loom
  $L bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s32c6.tgz" -C "$OUT" .
