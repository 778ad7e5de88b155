#!/bin/bash
# Session 54, call 1 (~9 minutes): session 53's prepared call (the megakernel's per-op trace beside
# the graph step's split at batch 1 ctx 600) after `ctest -L cuda` on main 7194953, the first GPU
# run since the CUDA module's build-tree RPATH became `$ORIGIN` only (cuBLAS through
# LD_LIBRARY_PATH, scripts/device_env.sh): ldd shows what the module resolves. Carry
# .device/s54.txz (`scripts/pack_device.sh tests build .device/s54.txz`).
python3 -c "import tarfile; tarfile.open('.device/s54.txz').extractall()"
. scripts/device_env.sh
{ nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
  ldd build/bin/libloom-cuda.so | grep -E "cublas|cudart|not found"; } 2>&1 | tee "$OUT/device.txt"
(cd build && timeout 290 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest.log")
tail -5 "$OUT/ctest.log"
timeout 90 build/bin/cuda_bench "$OUT/step_b1.json" --step-case 1 600 > "$OUT/step_b1.log" 2>&1
echo "step rc=$?"; grep -E "nothing|without attention|layer GEMMs|lm_head" "$OUT/step_b1.log"
timeout 200 build/bin/cuda_bench "$OUT/mega_trace.json" --megakernel > "$OUT/mega_trace.log" 2>&1
echo "trace rc=$?"; tail -60 "$OUT/mega_trace.log"
