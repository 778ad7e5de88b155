#!/bin/bash
# Session 72, call 2 (~60 s): the skinny GEMM with 128-row w tiles and the split-k fold through
# the cluster's distributed shared memory (SK, default .device/sk7.txz: a tests pack of main with
# it). cuda_test_gemm (the CPU reference, 1-8 splits), then cuda_bench --only gemm_skinny (per
# shape against cuBLAS, the timeline, the 22-layer chain).
# carry: [".device/sk7.txz"]
set -u
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
unpack_pack "${SK:-.device/sk7.txz}" sk
timeout 120 sk/build/bin/cuda_test_gemm > "$OUT/sk_test_gemm.log" 2>&1  # (its CTest file names /work/main)
echo "skinny cuda_test_gemm rc=$? at ${SECONDS}s"; tail -4 "$OUT/sk_test_gemm.log"
timeout 200 sk/build/bin/cuda_bench "$OUT/skinny.json" --only gemm_skinny > "$OUT/skinny.log" 2>&1
echo "cuda_bench rc=$? at ${SECONDS}s"; grep -A60 "^gemm " "$OUT/skinny.log" | head -70
