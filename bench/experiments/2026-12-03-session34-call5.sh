#!/bin/bash
# Session 34, call 5 (~4 minutes): main after the RoPE-ahead change (kept in call 4), loom bench
# b1, 2, 4, 8 twice for the README; then the partition probe rebased onto it
# (bench/experiments/2026-12-03-probe-timeline-partition-stamps-rebased.patch, not for main) to
# see where batch 1's attention window goes now (call 3 had it on the tree before).
# Build here first: make -C build -j$(nproc) && scripts/pack_device.sh run build .device/base.txz;
#   scripts/variant_build.sh -t "loom" -o .device/pp.txz \
#     pp=bench/experiments/2026-12-03-probe-timeline-partition-stamps-rebased.patch
#   cp this file .device/run.sh; carry .device/base.txz, .device/pp.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall(); tarfile.open('.device/pp.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s34c5; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do
  build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8 \
    --json "$OUT/bench_$r.json" > "$OUT/bench_$r.log" 2>&1
  echo "bench r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_$r.log" | tr -s ' '
done
tar czf "$FINAL/s34c5.tgz" -C "$OUT" .
LOOM_PROBE=$OUT/probe_b1 .device/pp/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1 --json "$OUT/bench_probe_b1.json" > "$OUT/bench_probe_b1.log" 2>&1
echo "probe b1 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_probe_b1.log" | tr -s ' '
for f in $OUT/probe_b1.*; do gzip -9 "$f"; done
python3 bench/experiments/2026-12-02-probe-timeline-partition.py $OUT/probe_b1.gemv.gz \
  $OUT/probe_b1.attention.gz | tee "$OUT/timeline_b1.txt"
tar czf "$FINAL/s34c5.tgz" -C "$OUT" .
