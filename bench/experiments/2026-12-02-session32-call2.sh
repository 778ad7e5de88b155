#!/bin/bash
# Prepared in session 31 for session 32 (~3 minutes); not run yet. Session 31's call 7: the
# norms and act_mul by PDL made batch 8 3% faster but batch 16 0.9% slower (at 9-16 slots only
# qkv and o run through the GEMV; gate_up and down are cuBLAS, which never triggers early).
# Here the attention norm alone by PDL at 9-16 slots, in front of the qkv GEMV
# (bench/experiments/2026-12-02-attn-norm-pdl-9-16-slots-env.patch, LOOM_ATTN_NORM_PDL, host
# code only): whether the loss came from the mlp norm / act_mul (before cuBLAS) or from the
# attention norm too. Predicted: batch 16 −0.5 to −1.5% if the qkv GEMV's early weights pay.
# Build here first:
#   scripts/variant_build.sh -t "loom" -o .device/anp.txz \
#     anp=bench/experiments/2026-12-02-attn-norm-pdl-9-16-slots-env.patch
#   cp bench/experiments/2026-12-02-session32-call2.sh .device/run.sh
# carry .device/anp.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/anp.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s32c2; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/anp/bin
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in 0 1; do
  LOOM_ATTN_NORM_PDL=$v $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 12,16 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "attn norm pdl $v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s32c2.tgz" -C "$OUT" .
