#!/bin/bash
# Prepared in session 37 for session 38 (built here, not run; ~2 minutes). Batch 8's attention
# timeline: the probe (bench/experiments/2026-12-03-probe-tma-timeline.patch: session 35's GEMV
# and split-kernel stamps, plus a record a TMA decode warp: entry, past the wait, first tile in,
# the chain's end, the count, the fold's end) under loom bench b8, then the summary
# (bench/experiments/2026-12-03-probe-tma-timeline.py): qkv's end -> the first warp past its
# wait, the wait spread, first tile, chain, count, fold, attention's end -> o's wait. Call 2 of
# session 37 left a fixed ~9 us a layer; this says where it goes.
# Build: scripts/variant_build.sh -t "loom" -o .device/probe.txz probe=<patch>;
#   carry .device/probe.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/probe.txz').extractall()"
DST=$OUT; W=/tmp/s38c1; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
LOOM_PROBE=$W/probe timeout 120 .device/probe/bin/loom bench --model /tmp/terra --frames 8 \
  --context-frames 3 --batch-sizes 8 --json "$W/bench_probe_b8.json" > "$W/bench_probe_b8.log" 2>&1
echo "probe b8 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_probe_b8.log" | tr -s ' ' | cut -c1-40)"
python3 bench/experiments/2026-12-03-probe-tma-timeline.py "$W/probe" 220 | tee "$W/timeline.txt"
gzip -k "$W"/probe.* 2>/dev/null; rm -f "$W"/probe.attention_tma "$W"/probe.gemv "$W"/probe.gemv_mma "$W"/probe.attention_mma
tar czf "$DST/s38c1.tgz" -C "$W" .
