#!/bin/bash
# Session 35, call 5 (~2.5 minutes): where batch 1's attention window goes after calls 1-2: the
# partition probe rebased onto main (bench/experiments/2026-12-03-probe-timeline-partition-stamps-s35.patch,
# not for main; read by bench/experiments/2026-12-02-probe-timeline-partition.py), and the
# batch-1 step case on main (ms at ctx 600 / 2,000 / 6,000 with each family left out).
# Session 34's probe: first wait -> last wait 2.59 us, wait -> tile 1.28, fold 5.09, qkv end ->
# o's first wait 12.86. Predicted: the wait spread under 1 us; the step's attention share
# 0.187 / 0.206 / 0.243 ms -> ~0.16 / 0.18 / 0.22.
# Build here first: scripts/variant_build.sh -t loom -o .device/sx.txz pp=<patch>; carry
#   .device/{base,sx}.txz and .device/run.sh (base.txz: call 3's main with cuda_bench).
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'sx')]"
DST=$OUT; W=/tmp/s35c5; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
LOOM_PROBE=$W/probe_b1 .device/pp/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1 --json "$W/bench_probe_b1.json" > "$W/bench_probe_b1.log" 2>&1
echo "probe b1 rc=$?"; grep -E '^ +[0-9]+ ' "$W/bench_probe_b1.log" | tr -s ' '
for f in $W/probe_b1.*; do gzip -9 "$f"; done
python3 bench/experiments/2026-12-02-probe-timeline-partition.py $W/probe_b1.gemv.gz \
  $W/probe_b1.attention.gz > "$W/timeline_b1.txt" 2>&1; tail -30 "$W/timeline_b1.txt"
tar czf "$DST/s35c5.tgz" -C "$W" .
timeout 60 build/bin/cuda_bench "$W/step_case_b1.json" --step-case 1 600,2000,6000 > "$W/step_case_b1.log" 2>&1
echo "step case rc=$?"; tail -14 "$W/step_case_b1.log"
tar czf "$DST/s35c5.tgz" -C "$W" .
