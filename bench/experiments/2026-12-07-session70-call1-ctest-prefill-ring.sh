#!/bin/bash
# Session 70, call 1: ctest -L cuda on main at 233d877 (.device/m71.txz, a tests pack: the first
# GPU run of 5e7b397's prefill-builds test and 8dbfafb's capture-count checks), then session 69's
# prefill ring call (main / s4 / s4b3 from .device/pf.txz; ROUNDS of its loom bench runs, NCU=1
# adds the ncu profile of the default build's prefill kernel).
set -u
. scripts/device_env.sh
unpack_pack .device/m71.txz .
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 270 ctest -L cuda --output-on-failure) > "$OUT/ctest_cuda.log" 2>&1
echo "ctest rc=$? at ${SECONDS}s"; tail -4 "$OUT/ctest_cuda.log"
bash bench/experiments/2026-12-07-session69-call-prefill-ring.sh
