#!/bin/bash
# Session 32's fifth device call (~2 minutes): where batch 1's decode attention goes inside the
# step. Step cases put ~9.7 us a layer on it at ctx 600 (~11.4 at 2,000) for ~2 us of work, and
# neither one carveout nor PDL changes explain it (call 4). A probe build
# (bench/experiments/2026-12-02-probe-step-timeline-gemv-attention.patch, not for main) has
# every GEMV block and every working split-decode attention block write %globaltimer at its
# start, after its PDL wait, after its staging (GEMV) / partition loop (attention) and at its
# end; loom bench at batch 1 and 2 dumps the last records at exit. bench/experiments/
# 2026-12-02-probe-timeline.py reads them into per-layer phases (qkv end -> attention start /
# wait / work / fold -> o's release).
# Build here first:
#   scripts/variant_build.sh -t "loom" -o .device/pr.txz \
#     pr=bench/experiments/2026-12-02-probe-step-timeline-gemv-attention.patch
#   cp bench/experiments/2026-12-02-session32-call5.sh .device/run.sh
# carry .device/pr.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/pr.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s32c5; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/pr/bin
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
$B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
  --json "$OUT/bench_noprobe_b1.json" > "$OUT/bench_noprobe_b1.log" 2>&1
echo "no probe b1 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_noprobe_b1.log" | tr -s ' '
for b in 1 2; do
  LOOM_PROBE=$OUT/probe_b$b $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes $b \
    --json "$OUT/bench_probe_b$b.json" > "$OUT/bench_probe_b$b.log" 2>&1
  echo "probe b$b rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_probe_b$b.log" | tr -s ' '
  ls -la $OUT/probe_b$b.* 2>&1 | head
done
for f in $OUT/probe_b*.*; do gzip -9 "$f"; done
tar czf "$FINAL/s32c5.tgz" -C "$OUT" .
