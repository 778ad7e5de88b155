#!/bin/bash
# Prepared in session 33 for session 34 (~2 minutes); not run yet. Batch 1's partition: session
# 33's call 9 has 6.1 us from the last attention block's wait to its partition's partial, with
# its tiles in flight since before qkv's end. The probe
# (bench/experiments/2026-12-02-probe-timeline-partition-stamps.patch, not for main) stamps
# warp 0's first tile in shared memory (t5) and its scores, P and P V done (t6) in every working
# block; read with bench/experiments/2026-12-02-probe-timeline-partition.py: wait -> tile in
# (the copies' and q's latency), tile in -> computed (the mma chain), computed -> partial done
# (the 4 tiles' shared-memory fold, the partial's write). Rebase it onto session 34's main first
# if the first call's fold change is kept (it touches the same kernel's end).
# Build here first:
#   scripts/variant_build.sh -t "loom" -o .device/pp.txz pp=bench/experiments/2026-12-02-probe-timeline-partition-stamps.patch
#   cp this file .device/run.sh; carry .device/pp.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/pp.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s34c2; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
LOOM_PROBE=$OUT/probe_b1 .device/pp/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1 --json "$OUT/bench_probe_b1.json" > "$OUT/bench_probe_b1.log" 2>&1
echo "probe b1 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_probe_b1.log" | tr -s ' '
for f in $OUT/probe_b1.*; do gzip -9 "$f"; done
python3 bench/experiments/2026-12-02-probe-timeline-partition.py $OUT/probe_b1.gemv.gz \
  $OUT/probe_b1.attention.gz | tee "$OUT/timeline_b1.txt"
tar czf "$FINAL/s34c2.tgz" -C "$OUT" .
