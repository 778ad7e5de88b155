#!/bin/bash
# Session 33's sixth device call (~2 minutes): where batch 1's and batch 8's decode steps go on
# main after the session's two changes (cuda_bench --step-case, ctx 600 / 2,000 / 6,000), for
# the next session's plan.
# Build here first: the tests pack of session 33's fifth call (.device/base.txz).
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s33c6; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for b in 1 8; do
  timeout 150 build/bin/cuda_bench "$OUT/step_b$b.json" --step-case $b 600,2000,6000 > "$OUT/step_b$b.log" 2>&1
  echo "step case b$b rc=$?"
  grep -E "graph without (nothing|attention |layer GEMMs|qkv|o GEMM|gate_up|down|lm_head\+draw|norms)" "$OUT/step_b$b.log"
done
tar czf "$FINAL/s33c6.tgz" -C "$OUT" .
