#!/bin/bash
# Prepared in session 38 for session 39 (built here, not run; ~2 minutes). Batch 8's attention
# timeline again, on main with RoPE inside the TMA decode kernel (a0ec638): session 38's call 1
# probe rebased (bench/experiments/2026-12-03-probe-tma-timeline-fused-rope.patch), under loom
# bench b8, summarised by bench/experiments/2026-12-03-probe-tma-timeline.py. Call 1 of session
# 38 (rope_kv_write between qkv and attention): qkv end -> wait 5.79 us, first tile 0.86, chain
# ~5.5 (4 tiles), count 0.32, fold 5.34, end -> o wait 0.74. Expected: qkv end -> wait ~1 us.
# Build: scripts/variant_build.sh -t "loom" -o .device/probe2.txz probe=<patch>;
#   carry .device/probe2.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/probe2.txz').extractall()"
DST=$OUT; W=/tmp/s39c1; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
LOOM_PROBE=$W/probe timeout 120 .device/probe/bin/loom bench --model /tmp/terra --frames 8 \
  --context-frames 3 --batch-sizes 8 --json "$W/bench_probe_b8.json" > "$W/bench_probe_b8.log" 2>&1
echo "probe b8 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_probe_b8.log" | tr -s ' ' | cut -c1-40)"
python3 bench/experiments/2026-12-03-probe-tma-timeline.py "$W/probe" 220 | tee "$W/timeline.txt"
gzip -k "$W"/probe.* 2>/dev/null; rm -f "$W"/probe.attention_tma "$W"/probe.gemv "$W"/probe.gemv_mma "$W"/probe.attention_mma
tar czf "$DST/s39c1.tgz" -C "$W" .
