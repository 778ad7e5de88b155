#!/bin/bash
# Session 65, call 2: the KV boxes' tree (.device/kvt.txz, a tests pack): ctest -L cuda, then
# compute-sanitizer memcheck and synccheck on the megakernel's bf16 comparisons (the boxes at
# block sizes 64, 8, 24 and 12, and the contexts of 300-3,000 keys at block size 16).
set -u
python3 -c "import tarfile; tarfile.open('.device/kvt.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 330 ctest -L cuda --output-on-failure) > "$OUT/ctest_cuda.log" 2>&1
echo "ctest rc=$?"; tail -4 "$OUT/ctest_cuda.log"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck synccheck; do
  LOOM_TEST_MEGA_TIMEOUT_S=120 timeout 120 "$cs" --tool $tool --kernel-name kns=megakernel \
    --error-exitcode 3 build/bin/cuda_test_megakernel \
    -tc="bf16 megakernel near the graph path*" > "$OUT/sanitize_$tool.log" 2>&1
  echo "$tool rc=$?"; tail -3 "$OUT/sanitize_$tool.log"
done
