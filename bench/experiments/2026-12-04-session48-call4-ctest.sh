#!/bin/bash
# Session 48, call 4 (~3 minutes): ctest -L cuda on the final tree. Carry .device/s48.txz
# (`scripts/pack_device.sh tests build .device/s48.txz` at the commit that adds this script's
# test: the CUDA backend refusing a vocabulary above the device draw's limit at load).
python3 -c "import tarfile; tarfile.open('.device/s48.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 300 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest.log")
tail -5 "$OUT/ctest.log"
build/bin/cuda_test_features -tc="*vocabulary above*" > "$OUT/features-vocab.log" 2>&1; tail -3 "$OUT/features-vocab.log"
