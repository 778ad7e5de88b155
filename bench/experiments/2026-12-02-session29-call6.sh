#!/bin/bash
# Session 29's sixth device call: ctest -L cuda on the whole tree with gemv_linear_ops (4e60731).
# Build here first:
#   make -C build -j3 && rm -f build/bin/cuda_test_shared_plan && scripts/pack_device.sh tests build
#   cp bench/experiments/2026-12-02-session29-call6.sh .device/run.sh
# then carry .device/carry.txz and .device/run.sh; `bash .device/run.sh` (~2 minutes).
python3 -c "import tarfile; tarfile.open('.device/carry.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s29c6; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 170 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s29c6.tgz" -C "$OUT" .
