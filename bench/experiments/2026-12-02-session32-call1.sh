#!/bin/bash
# Prepared in session 31 for session 32's first device call (~4 minutes); not run yet.
# Batch 2-4 run the fused GEMV schedule (tensor-core GEMVs with RMSNorm / silu·mul in their
# staging, no norm kernels): at batch 4 the layer GEMVs take ~0.95 ms a step (session 31, call
# 6), about what batch 8's GEMM path takes (layer GEMMs 0.77 + norms and silu·mul 0.17 before
# session 31's norms by PDL, −3% of the batch-8 frame). With kGemvMaxSlots lowered
# (bench/experiments/2026-12-02-gemv-max-slots-env.patch: LOOM_GEMV_MAX_SLOTS, host code only),
# 2-4 slots take the GEMM path: qkv, o and down through the tensor-core GEMV on 2-4 staged rows
# (half of batch 8's staging), gate_up on cuBLAS, the norms and act_mul by PDL. Predicted: batch
# 4 ~5-8% faster, batch 2 unclear (the fused 2-row chain is near the one-row one).
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_test_cuda_backend" -o .device/gs.txz \
#     gs=bench/experiments/2026-12-02-gemv-max-slots-env.patch
#   cp bench/experiments/2026-12-02-session32-call1.sh .device/run.sh
# carry .device/gs.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/gs.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s32c1; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
B=.device/gs/bin
LOOM_GEMV_MAX_SLOTS=1 timeout 150 $B/cuda_test_cuda_backend > "$OUT/test_gs1.log" 2>&1
echo "backend test, fused schedule at 1 slot only rc=$? $(grep -E 'assertions' "$OUT/test_gs1.log" | tr -s ' ')"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in 4 2 1; do
  LOOM_GEMV_MAX_SLOTS=$v $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 2,3,4 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "max slots $v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s32c1.tgz" -C "$OUT" .
