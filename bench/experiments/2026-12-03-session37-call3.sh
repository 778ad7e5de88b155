#!/bin/bash
# Session 37, call 3 (~5 minutes). tt (bench/experiments/2026-12-03-tma-tile-chunks.patch): the
# TMA decode kernel's chunks of consecutive tiles instead of partitions (z up to 4 a partition);
# a partition cut between chunks is folded by its last chunk to count in (the leading tiles'
# state, then the later tiles' partials, in order: the same bits). Call 2: b8's attention has a
# fixed ~9 us a layer in the step (alone in the graph 13.0 / 17.2 / 23.5 us a layer at ctx 2000 /
# 4000 / 5500), and past ctx 4,096 chunks of 2 partitions (8 tiles a warp). With tiles, b8's 16
# chunks a pair take 2 tiles at ctx 2000, 4 at 4000, 5-6 at 5000-5500.
# 1. tt's attention (bitwise against the split kernel and the prefill), shared and backend tests.
# 2. cuda_bench --attention-case b8 ctx 2000 / 4000 / 5000, b4 ctx 4000: main and tt.
# 3. loom bench b4, b8, b16: tt with LOOM_TMA_TILES=0 (main's chunks) and 1, two rounds.
# Predicted: b8 alone ctx 2000 18.6 -> ~16-17 us, ctx 5000 28.8 -> ~24; loom bench b8 -1 to -3%,
# b4 -1 to -2%.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'tt')]"
DST=$OUT; W=/tmp/s37c3; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
for t in cuda_test_attention cuda_test_attention_shared cuda_test_cuda_backend; do
  timeout 200 .device/tt/bin/$t > "$W/test_tt_$t.log" 2>&1
  echo "tt $t rc=$? $(grep -E 'assertions' "$W/test_tt_$t.log" | tr -s ' ')"
done
tar czf "$DST/s37c3.tgz" -C "$W" .
for c in "8 2000" "8 4000" "8 5000" "4 4000"; do
  set -- $c
  for n in main tt; do
    b=build/bin; [ $n != main ] && b=.device/$n/bin
    timeout 60 $b/cuda_bench "$W/attn_${n}_b$1_ctx$2.json" --attention-case $1 $2 > "$W/attn_${n}_b$1_ctx$2.log" 2>&1
    echo "$n attn b$1 ctx $2 rc=$?"; grep -E "TMA config 0|mma " "$W/attn_${n}_b$1_ctx$2.log" | sed 's/attention decode //' | cut -c1-90
  done
done
tar czf "$DST/s37c3.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name tiles round
  LOOM_TMA_TILES=$2 timeout 150 .device/tt/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 4,8,16 --json "$W/bench_$1_$3.json" > "$W/bench_$1_$3.log" 2>&1
  echo "$1 r$3 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$3.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run parts 0 $r; run tiles 1 $r; tar czf "$DST/s37c3.tgz" -C "$W" .; done
