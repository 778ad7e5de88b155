#!/bin/bash
# Session 60, call 9: cuda_test_megakernel on main with the ring stopping at the instruction at
# batch 1 (gemv_ahead off by default there; a host flag, the kernel's SASS unchanged), and
# memcheck on the f32 comparison with the CPU (batch 1, 2, 8 on the tiny checkpoints).
# Carry .device/s60z.txz.
python3 -c "import tarfile; tarfile.open('.device/s60z.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 150 build/bin/cuda_test_megakernel > "$OUT/test.log" 2>&1
echo "test rc=$?"; grep -E "ERROR|error|assertions|Status" "$OUT/test.log" | head
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
LOOM_TEST_MEGA_TIMEOUT_S=120 timeout 200 "$cs" --tool memcheck --kernel-name kns=megakernel \
  --error-exitcode 3 build/bin/cuda_test_megakernel -tc="f32 megakernel equals the CPU*" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -4 "$OUT/memcheck.log"
