#!/bin/bash
# Session 37, call 3 (~5 minutes; its first form, with the experiment build tt, was refused
# four times). kt (bench/experiments/2026-12-03-tma-tile-chunks-kept-env.patch: the kept form
# of bench/experiments/2026-12-03-tma-tile-chunks.patch, with its test, plus LOOM_TMA_TILES=0 to
# turn it off): the TMA decode kernel's chunks of consecutive tiles instead of partitions (z up
# to 4 a partition); a partition cut between chunks is folded by its last chunk to count in (the
# leading tiles' state, then the later tiles' partials, in order: the same bits). Call 2: b8's
# attention has a fixed ~9 us a layer in the step, and past ctx 4,096 chunks of 2 partitions (8
# tiles a warp). With tiles, b8's 16 chunks a pair take 2 tiles at ctx 2000, 4 at 4000, 5-6 at
# 5000-5500.
# 1. main (base.txz): cuda_bench --attention-case b8 ctx 2000 / 4000 / 5000, b4 ctx 4000.
# 2. kt (kt.txz, the whole tests pack): ctest -L cuda, the same attention cases, loom bench
#    b4, b8 with LOOM_TMA_TILES=0 (main's chunks) and 1, two rounds.
# Predicted: b8 alone ctx 2000 18.6 -> ~16-17 us, ctx 5000 28.8 -> ~24; loom bench b8 -1 to -3%,
# b4 -1 to -2%.
DST=$OUT; W=/tmp/s37c3; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
attn() {  # name
  for c in "8 2000" "8 4000" "8 5000" "4 4000"; do
    set -- $c
    timeout 60 build/bin/cuda_bench "$W/attn_${N}_b$1_ctx$2.json" --attention-case $1 $2 > "$W/attn_${N}_b$1_ctx$2.log" 2>&1
    echo "$N attn b$1 ctx $2 rc=$? $(grep -E "TMA config 0|: mma " "$W/attn_${N}_b$1_ctx$2.log" | sed 's/attention decode //' | cut -c20-60 | tr '\n' '|')"
  done
}
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
N=main attn
python3 -c "import tarfile; tarfile.open('.device/kt.txz').extractall()"
(cd build && timeout 240 ctest -L cuda --output-on-failure > "$W/ctest_kt.log" 2>&1; echo "kt ctest rc=$?"; grep -E "tests passed|tests failed" "$W/ctest_kt.log")
tar czf "$DST/s37c3.tgz" -C "$W" .
N=kt attn
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name tiles round
  LOOM_TMA_TILES=$2 timeout 120 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 4,8 --json "$W/bench_$1_$3.json" > "$W/bench_$1_$3.log" 2>&1
  echo "$1 r$3 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$3.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run parts 0 $r; run tiles 1 $r; tar czf "$DST/s37c3.tgz" -C "$W" .; done
