#!/bin/bash
# Session 37, call 4 (~5 minutes). w3 (bench/experiments/2026-12-03-tma-three-warp-blocks-env.patch):
# the TMA decode kernel's 2-stage ring in blocks of 3 warps (two an SM as before: 792 warps
# instead of 528) for few pairs (<= 64) with more partitions than a wave of the 4-warp blocks has
# warps. Call 2: at b8 the 4-warp blocks give z = 16 chunks a pair, so past ctx 4,096 a chunk is
# two partitions (8 tiles, 4,000 -> 5,500 at 1.9 TB/s in the step against 3.8 below); one stage
# (config 4) doubled the warps but lost the ring. 3 warps: z = 24 at b8, one partition a chunk
# up to ctx 6,144 with the 2-stage ring kept. Call 3: cutting partitions (more chunks, a fold a
# partition) lost; this adds chunks only where a partition is whole.
# 1. w3's attention (config 5 and the new rule bitwise against the split and prefill kernels) and
#    backend tests.
# 2. cuda_bench --attention-case b8 ctx 2000 / 5000, b16 ctx 4000: main and w3.
# 3. loom bench b8, b16 with LOOM_TMA_W3=0 (main) and 1, two rounds.
# Predicted: b8 ctx 5000 alone 28.7 -> ~25 us, ctx 2000 unchanged (4-warp rule: 8 x 8 < 528);
# loom bench b8 -1 to -2%, b16 -1 to -3%.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'w3')]"
DST=$OUT; W=/tmp/s37c4; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
for t in cuda_test_attention cuda_test_cuda_backend; do
  timeout 150 .device/w3/bin/$t > "$W/test_w3_$t.log" 2>&1
  echo "w3 $t rc=$? $(grep -E 'assertions' "$W/test_w3_$t.log" | tr -s ' ')"
done
tar czf "$DST/s37c4.tgz" -C "$W" .
for c in "8 2000" "8 5000" "16 4000"; do
  set -- $c
  for n in main w3; do
    b=build/bin; [ $n != main ] && b=.device/$n/bin
    timeout 60 $b/cuda_bench "$W/attn_${n}_b$1_ctx$2.json" --attention-case $1 $2 > "$W/attn_${n}_b$1_ctx$2.log" 2>&1
    echo "$n attn b$1 ctx $2 rc=$? $(grep -E "TMA config [05]" "$W/attn_${n}_b$1_ctx$2.log" | sed 's/attention decode //' | cut -c20-60 | tr '\n' '|')"
  done
done
tar czf "$DST/s37c4.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name w3 round
  LOOM_TMA_W3=$2 timeout 100 .device/w3/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 8,16 --json "$W/bench_$1_$3.json" > "$W/bench_$1_$3.log" 2>&1
  echo "$1 r$3 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$3.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run w4 0 $r; run w3 1 $r; tar czf "$DST/s37c4.tgz" -C "$W" .; done
