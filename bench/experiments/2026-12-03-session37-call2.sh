#!/bin/bash
# Session 37, call 2 (~5 minutes). Where batch 4-8's decode attention goes, by the TMA kernel's
# builds. At b8 (32 (sequence, kv head) pairs) the default build (2 stages x 4 warps, one block
# an SM: 528 warps) gives z = 16 chunks a pair: one partition (4 tiles, a warp's serial chain)
# a chunk up to ctx 4,096, two partitions (8 tiles) past it. The one-stage build (config 4: two
# blocks an SM, 1,056 warps) gives z = 33: one partition a chunk at every bench context.
# 1. cuda_bench --attention-case at b8 ctx 2,000 / 4,000 / 5,000 and b4 ctx 4,000 / 5,500: every
#    build's time (each checked bitwise against the split kernel).
# 2. loom bench b4, b8 with LOOM_TMA_CFG = 0 (main) / 4, two rounds, and 1 / 2 / 3 once
#    (bench/experiments/2026-12-03-tma-config-env.patch; tc = main + the env read).
# 3. cuda_bench --step-case 8 2000,4000,5500 (main): batch 8's per-phase split.
# Predicted: config 4 faster at ctx 5,000 (4 tiles a warp against 8: ~2 us a tile a warp, session
# 31's b8 / b16 slope), the same at ctx <= 4,000 or slower (one stage); end to end b8 -1 to -4%.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'tc')]"
DST=$OUT; W=/tmp/s37c2; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
for c in "8 2000" "8 4000" "8 5000" "4 4000" "4 5500"; do
  set -- $c
  timeout 60 build/bin/cuda_bench "$W/attn_b$1_ctx$2.json" --attention-case $1 $2 > "$W/attn_b$1_ctx$2.log" 2>&1
  echo "attn b$1 ctx $2 rc=$?"; grep -E "TMA config|mma " "$W/attn_b$1_ctx$2.log" | sed 's/attention decode //'
done
tar czf "$DST/s37c2.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name cfg round
  LOOM_TMA_CFG=$2 timeout 120 .device/tc/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 4,8 --json "$W/bench_$1_$3.json" > "$W/bench_$1_$3.log" 2>&1
  echo "$1 r$3 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$3.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run cfg0 0 $r; run cfg4 4 $r; done
tar czf "$DST/s37c2.tgz" -C "$W" .
for c in 1 2 3; do run cfg$c $c 1; done
tar czf "$DST/s37c2.tgz" -C "$W" .
timeout 120 build/bin/cuda_bench "$W/step_case_b8.json" --step-case 8 2000,4000,5500 > "$W/step_case_b8.log" 2>&1
echo "step case rc=$?"; tail -5 "$W/step_case_b8.log"
tar czf "$DST/s37c2.tgz" -C "$W" .
