#!/bin/bash
# Session 60, call 7: main after the session's kernel changes (TMA boxes, padded attention rows,
# cp.async K/V at 4-8 slots): ctest -L cuda (all of it), then compute-sanitizer memcheck and
# synccheck on the megakernel's launches in the bf16 comparison at 300-3,000 keys (batch 1, 2,
# 4 and 8: the tensor-core path's TMA boxes, tail maps and padded rows at 4 and 8).
# Carry .device/s60f.txz.
python3 -c "import tarfile; tarfile.open('.device/s60f.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 300 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1); echo "ctest rc=$?"
grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.log" | tail -6
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck synccheck; do
  LOOM_TEST_MEGA_TIMEOUT_S=120 timeout 130 "$cs" --tool $tool --kernel-name kns=megakernel \
    --error-exitcode 3 build/bin/cuda_test_megakernel \
    -tc="bf16 megakernel near the graph path*" > "$OUT/sanitize_$tool.log" 2>&1
  echo "$tool rc=$?"; tail -4 "$OUT/sanitize_$tool.log"
done
