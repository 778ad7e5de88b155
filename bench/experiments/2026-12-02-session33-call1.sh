#!/bin/bash
# Prepared in session 32 for session 33 (~2 minutes); not run yet. Batch 1's step timeline on
# main with the staged fold (session 32's call 6: b1 only -1.1% where call 5's timeline
# predicted -2 to -4%): the probe rebased
# (bench/experiments/2026-12-02-probe-step-timeline-on-staged-fold.patch, not for main) also
# stamps the attention block after its fence and count, so the fold's ~6 us at 25 partitions
# splits into the count and the fold itself. Read with
#   python3 bench/experiments/2026-12-02-probe-timeline.py probe_b1.gemv.gz probe_b1.attention.gz
# Build here first:
#   scripts/variant_build.sh -t "loom" -o .device/pr2.txz \
#     pr2=bench/experiments/2026-12-02-probe-step-timeline-on-staged-fold.patch
#   cp bench/experiments/2026-12-02-session33-call1.sh .device/run.sh
# carry .device/pr2.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/pr2.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s33c1; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/pr2/bin
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
$B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
  --json "$OUT/bench_noprobe_b1.json" > "$OUT/bench_noprobe_b1.log" 2>&1
echo "no probe b1 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_noprobe_b1.log" | tr -s ' '
LOOM_PROBE=$OUT/probe_b1 $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1 --json "$OUT/bench_probe_b1.json" > "$OUT/bench_probe_b1.log" 2>&1
echo "probe b1 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_probe_b1.log" | tr -s ' '
for f in $OUT/probe_b1.*; do gzip -9 "$f"; done
python3 bench/experiments/2026-12-02-probe-timeline.py $OUT/probe_b1.gemv.gz $OUT/probe_b1.attention.gz \
  | tee "$OUT/timeline_b1.txt"
tar czf "$FINAL/s33c1.tgz" -C "$OUT" .
