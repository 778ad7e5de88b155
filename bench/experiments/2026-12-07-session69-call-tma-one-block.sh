#!/bin/bash
# Prepared in session 68 (its device time ran out), for session 69: the TMA decode kernel at one
# block an SM where two blocks an SM would cut every (tile, kv head) pair in two chunks
# (bench/experiments/2026-12-07-tma-one-block-an-sm-prepared.patch: tma_one_block_an_sm in
# kernels/attention.h, launch_tma in attention_tma.cu, a CPU test in tests/test_tma_split.cpp).
# Session 68's H100 probe measured that launch (the blocks-an-SM cap of 1) at 8,148 keys FP8:
# attention b128 215.7 -> 182.9 us, b96 168.2 -> 151.3, b64 and b192 unchanged
# (bench/results/2026-12-07-h100-s68-pipeline-probe.json). Predicted here: the same at b96 and
# b128 (one block an SM now chosen by the launch itself, also under PDL in the graphs), b256
# and b64 unchanged; loom bench FP8 128 jobs x 8 frames faster by a few % (attention is ~75% of
# such a step).
# Packs: .device/m69.txz (main) and .device/ob.txz (main + the patch), each a tests pack
# (scripts/pack_device.sh tests BUILD .device/NAME.txz).
set -u
builds="m69 ob"
. scripts/device_env.sh
for v in $builds; do unpack_pack ".device/$v.txz" "$v"; done
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
mkdir -p "$OUT/ab"
(cd ob && timeout 120 build/bin/cuda_test_attention > "$OUT/ab/test_attention_ob.log" 2>&1
 echo "ob cuda_test_attention rc=$? at ${SECONDS}s")
grep -E "assertions|Status" "$OUT/ab/test_attention_ob.log" | head -2
for r in 1 2; do
  for v in $builds; do
    for b in 96 128 256; do
      timeout 60 "$v/build/bin/cuda_bench" "$OUT/ab/att_${v}_${b}_$r.json" --attention-case $b 8148 4 \
        fp8 64 2>&1 | grep "TMA config 0" | sed "s/^/$v r$r: /"
    done
  done
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in $builds $builds; do
  log=$OUT/ab/bench_${v}_$SECONDS
  timeout 120 "$v/build/bin/loom" bench --model /tmp/terra --kv-dtype fp8 --frames 8 \
    --context-frames 3 --batch-sizes 1 --num-jobs 128 --json "$log.json" > "$log.log" 2>&1
  echo "$v rc=$? at ${SECONDS}s"; grep -E "^ +128 " "$log.log" | tail -1
done
tar -czf "$OUT/ab.tgz" -C "$OUT" ab && rm -r "$OUT/ab"
