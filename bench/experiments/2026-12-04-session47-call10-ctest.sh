#!/bin/bash
# Session 47, call 10: ctest -L cuda on ed68227 (carry .device/s47c.txz, its tests pack): the
# final tree (32 draw chunks, the hoisted fp32 top-p scan).
python3 -c "import tarfile; tarfile.open('.device/s47c.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest.log")
tail -4 "$OUT/ctest.log"
