#!/bin/bash
# Session 31's sixth device call (~2 minutes), no code change: main at 976a2b4 (the TMA decode
# kernel from batch 4 with bf16 KV). Where the batch-4/8/16 steps go now that the TMA kernel
# runs them, with its 2-blocks-an-SM cap and PDL toggled (the step case's rows), for the next
# session's work on batch 8 (≈ 2.04× floor(8)).
# Build here first: as call 5 (.device/base.txz); cp this file .device/run.sh
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c6; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for b in 4 8 16; do
  build/bin/cuda_bench "$OUT/step_b$b.json" --step-case $b 2000,4000,6000 > "$OUT/step_b$b.log" 2>&1
  echo "b$b rc=$?"; grep -E "without (nothing|attention|layer GEMMs|gate_up GEMM|down GEMM|lm_head.draw|norms.silu_mul|all but attention|\(attention w/o PDL\)|\(no blocks cap\)|\(attn, no cap\)|\(attn w/o PDL\)) " "$OUT/step_b$b.log"
done
tar czf "$FINAL/s31c6.tgz" -C "$OUT" .
