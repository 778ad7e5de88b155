#!/bin/bash
# Session 33's ninth device call (~2 minutes): batch 1's step timeline on main with the qkv GEMV
# beside attention, and the split decode kernel's fold split into its count, its copies into
# shared memory and its merges (call 1: 4.35 us from the last partition to the fold's end, 0.74
# of it the count). The probe, not for main:
# bench/experiments/2026-12-02-probe-timeline-fold-stamps.patch (seven stamps a record); read
# with bench/experiments/2026-12-02-probe-timeline-fold.py.
# Build here first:
#   scripts/variant_build.sh -t "loom" -o .device/pf.txz pf=bench/experiments/2026-12-02-probe-timeline-fold-stamps.patch
#   cp this file .device/run.sh; carry .device/pf.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/pf.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s33c9; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/pf/bin
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
LOOM_PROBE=$OUT/probe_b1 $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1 --json "$OUT/bench_probe_b1.json" > "$OUT/bench_probe_b1.log" 2>&1
echo "probe b1 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_probe_b1.log" | tr -s ' '
for f in $OUT/probe_b1.*; do gzip -9 "$f"; done
python3 bench/experiments/2026-12-02-probe-timeline-fold.py $OUT/probe_b1.gemv.gz $OUT/probe_b1.attention.gz \
  | tee "$OUT/timeline_b1.txt"
tar czf "$FINAL/s33c9.tgz" -C "$OUT" .
