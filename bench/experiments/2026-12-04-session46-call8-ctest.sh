#!/bin/bash
# Session 46, call 8 (carry .device/s46f.txz, a tests pack of 939e800's build): ctest -L cuda on
# the final tree (the filter's rounds, fp32 top-p's intervals and the device quantum touch every
# filter path, the selects and the engine's sampled runs).
python3 -c "import tarfile; tarfile.open('.device/s46f.txz').extractall()"
W=/tmp/s46_8; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 300 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
tail -4 "$W/ctest.log"
tar czf "$OUT/s46_8.tgz" -C "$W" .
