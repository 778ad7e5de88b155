#!/bin/bash
# Session 48, call 8 (~4 minutes): ctest -L cuda on the final tree (93a79cb's code: the class
# scan by words, the tail's F table, the count quantum clamped at u = 40), then
# `cuda_bench --only sampling` once for its figures. Carry .device/s48b.txz
# (`scripts/pack_device.sh tests build .device/s48b.txz` at 93a79cb).
python3 -c "import tarfile; tarfile.open('.device/s48b.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 300 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest.log")
tail -5 "$OUT/ctest.log"
build/bin/cuda_bench "$OUT/sampling.json" --only sampling > "$OUT/sampling.log" 2>&1
grep -E "256 rows" "$OUT/sampling.log" | head -30
