#!/bin/bash
# Prepared in session 67 (its starts failed), for session 68, on an H200 for issue 13's figures
# (main's kernels at 0681e37, .device/m67b.txz): what the chunk steps (a frame's action slots,
# 7 one-slot tiles a sequence) cost on today's main, for issue 13's next step: cuda_bench
# --step-case 256 8148 fp8 (the decode step against steps with 1, 2 and 4 sequences on action
# slots, and each kernel family left out), then scripts/fp8_check.sh bench with KVS=fp8 (loom
# bench 256 jobs x 22 frames FP8 KV: its decode graph steps against all decode steps, mean step
# against device ms; it writes $OUT/device.txt).
set -u
# PACK overrides the pack (default .device/m70.txz: a tests pack of 8dbfafb, session 69).
. scripts/device_env.sh
unpack_pack "${PACK:-.device/m70.txz}"
timeout 150 build/bin/cuda_bench "$OUT/step_case.json" --step-case 256 8148 fp8 \
  > "$OUT/step_case.log" 2>&1
echo "step case rc=$? at ${SECONDS}s"
grep -E "action slots|without (nothing|attention) " "$OUT/step_case.log"
KVS=fp8 timeout 240 bash scripts/fp8_check.sh bench > "$OUT/b256_fp8.txt" 2>&1
echo "b256 rc=$? at ${SECONDS}s"; tail -n 8 "$OUT/b256_fp8.txt"
