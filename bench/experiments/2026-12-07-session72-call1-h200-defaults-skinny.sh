#!/bin/bash
# Session 72, call 1 (prepared in session 71; ~480 s): one machine start for two questions.
# 1. The skinny GEMM's timeline and probes (bench/experiments/2026-12-07-gemm-skinny-wgmma-not-
#    kept.patch; SK, default .device/sk6.txz, a tests pack of main with it): cuda_test_gemm, then
#    cuda_bench --only gemm_skinny (per shape against cuBLAS, the per-CTA timeline with the ring
#    alone and with every tile on its own x rows, the 22-layer chain). ~40 s.
# 2. On an H200, issue 13's FP8 256 x 22 row on main (M, default .device/m73.txz: b6f3690's
#    kernels, main's GPU code since) against 233d877 (.device/m71.txz), with ctest -L cuda on
#    main first. Predicted ~31,700-31,750 (31,331-31,463 in sessions 45-52).
# carry: [".device/sk6.txz", ".device/m73.txz", ".device/m71.txz"]
set -u
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
unpack_pack "${SK:-.device/sk6.txz}" sk
timeout 60 sk/build/bin/cuda_test_gemm > "$OUT/sk_test_gemm.log" 2>&1  # (its CTest file names /work/main)
echo "skinny cuda_test_gemm rc=$? at ${SECONDS}s"
timeout 150 sk/build/bin/cuda_bench "$OUT/skinny.json" --only gemm_skinny > "$OUT/skinny.log" 2>&1
echo "cuda_bench rc=$? at ${SECONDS}s"; grep -A40 "^timeline" "$OUT/skinny.log" | head -45
# Part 2 answers only an H200 question (the H100 row was measured in session 71).
grep -q H200 "$OUT/device.txt" || { echo "not an H200: part 2 skipped"; exit 0; }
unpack_pack "${M:-.device/m73.txz}" .
unpack_pack .device/m71.txz base
(cd build && timeout 150 ctest -L cuda -j3 --output-on-failure) > "$OUT/ctest_cuda.log" 2>&1
echo "ctest rc=$? at ${SECONDS}s"; grep -E "tests passed|Failed" "$OUT/ctest_cuda.log" | head -3
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in base new; do
  bin=build/bin/loom
  [ $v = base ] && bin=base/build/bin/loom
  [ $SECONDS -gt 400 ] && break
  log=$OUT/b256_fp8_$v
  timeout 170 $bin bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$log.json" > "$log.log" 2>&1
  echo "$v rc=$? at ${SECONDS}s"; grep -E "^ +256 |steps:" "$log.log" | tail -2
done
