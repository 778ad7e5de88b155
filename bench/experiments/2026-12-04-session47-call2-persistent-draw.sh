#!/bin/bash
# Session 47, call 2: the persistent draw (one block an SM slot over the (row, chunk) items,
# skipping drawn rows and listed rows' chunks 1..). Carry .device/s47.txz (scripts/pack_device.sh
# tests: the new tree) and .device/draw.tgz (call 1's "new": the drawn rows' blocks leaving at
# once, one block a (row, chunk)). ctest -L cuda on the new tree, then the sampling check, new
# against draw, alternated twice. Predicted: fp32 top-p 0.9 sigma 1 271.6 -> ~255 us (the draw's
# 22 us after the filter -> ~4), greedy 101 -> ~98, temperature within 1-2%.
python3 -c "import tarfile; tarfile.open('.device/s47.txz').extractall()"
mkdir -p draw && python3 -c "import tarfile; tarfile.open('.device/draw.tgz').extractall('draw')"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
(cd build && timeout 400 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?")
grep -E "tests passed|Total Test time|Failed|\*\*\*" "$OUT/ctest.log" | head -20
BUILD=build BASE=draw/build REPEATS=2 scripts/sampling_check.sh
