#!/bin/bash
# Session 38, call 2 (~5 minutes). sp (bench/experiments/2026-12-03-tma-spread-fold.patch): the
# TMA decode kernel's fold spread over a pair's chunks where every pair is chunked in one wave
# (b4-b32 at bf16), as the split kernel's fold is at batch 1 (session 36): each chunk counts in,
# waits for the others, folds ceil(64 / n_active) of the 64 (row, 8 dims) items from L2 in one
# round trip and counts out. Call 1's probe (b8, last frame): the last chunk's fold 5.3 us of a
# layer's ~14 us after the wait.
# 1. ctest -L cuda on sp's build (the TMA tests compare configs 0-5 bitwise with the split and
#    prefill kernels; at b8 they now spread).
# 2. cuda_bench --attention-case b8 ctx 2000 / 5000: main and sp.
# 3. loom bench b1, 4, 8, 16: main and sp, two rounds.
# Predicted: the fold 5.3 -> ~1.5-2 us a layer; b8 -3 to -5%, b4 and b16 -2 to -4%, b1 unchanged.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('sp_tests', 'ab')]"
DST=$OUT; W=/tmp/s38c2; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest_sp.log" 2>&1; echo "ctest sp rc=$?"; grep -E "tests passed|tests failed" "$W/ctest_sp.log")
tar czf "$DST/s38c2.tgz" -C "$W" .
for c in "8 2000" "8 5000"; do
  set -- $c
  for n in main sp; do
    timeout 60 .device/$n/bin/cuda_bench "$W/attn_${n}_b$1_ctx$2.json" --attention-case $1 $2 > "$W/attn_${n}_b$1_ctx$2.log" 2>&1
    echo "$n attn b$1 ctx $2 rc=$? $(grep -E "TMA config [05]|: mma " "$W/attn_${n}_b$1_ctx$2.log" | sed 's/attention decode //' | cut -c28-75 | tr '\n' '|')"
  done
done
tar czf "$DST/s38c2.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name round
  timeout 150 .device/$1/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,4,8,16 --json "$W/bench_$1_$2.json" > "$W/bench_$1_$2.log" 2>&1
  echo "$1 r$2 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$2.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run main $r; run sp $r; tar czf "$DST/s38c2.tgz" -C "$W" .; done
