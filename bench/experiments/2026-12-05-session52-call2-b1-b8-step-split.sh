#!/bin/bash
# Session 52, call 2 (~5 minutes): where batch 1's time goes on today's main, issue 15 being
# untouched since session 40 (0.672 s/frame there). Carry PACK (default .device/s52.txz: main
# with pk). loom bench bf16 8 frames 3 context frames at batch 1 and 8 (the README's rows), then
# `cuda_bench --step-case 1 600,2000,6000` and `--step-case 8 600,2000`: the graph step with
# each kernel family left out (attention, layer GEMVs, lm_head + draw, norms).
PACK=${1:-.device/s52.txz}
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall()" "$PACK"
W=/tmp/s52_2; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > "$W/ckpt.log" 2>&1
timeout 200 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1,8 --json "$W/bench_b1_b8.json" > "$W/bench_b1_b8.log" 2>&1
echo "bench rc=$?"; tail -8 "$W/bench_b1_b8.log"
tar czf "$OUT/s52_2.tgz" -C "$W" .
timeout 150 build/bin/cuda_bench "$W/step_b1.json" --step-case 1 600,2000,6000 > "$W/step_b1.log" 2>&1
echo "step b1 rc=$?"; grep -iE "without|whole|alone|step" "$W/step_b1.log" | head -24
timeout 100 build/bin/cuda_bench "$W/step_b8.json" --step-case 8 600,2000 > "$W/step_b8.log" 2>&1
echo "step b8 rc=$?"; grep -iE "without|whole|alone|step" "$W/step_b8.log" | head -16
tar czf "$OUT/s52_2.tgz" -C "$W" .
