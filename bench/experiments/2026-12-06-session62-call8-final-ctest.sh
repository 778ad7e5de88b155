#!/bin/bash
# Session 62, call 8: main 5d461e7 (2-slot tensor-core attention, gemv_early 1 and Down 2 at batch 1):
# ctest -L cuda, compute-sanitizer memcheck and synccheck on
# the megakernel's bf16 comparison at 300-3,000 keys (1, 2, 4, 8 slots: the new attention's
# ldmatrix and in-place P, the atomic adds), then attn_apart at b1 ctx 600 and 7,000
# (alternated twice; now gemv_early_down and batch 2) and the traces of b1 / b8 ctx 600 for scripts/mega_timeline.py.
# Carry .device/s62z.txz.
python3 -c "import tarfile; tarfile.open('.device/s62z.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 300 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1); echo "ctest rc=$?"
grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.log" | tail -6
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck synccheck; do
  LOOM_TEST_MEGA_TIMEOUT_S=120 timeout 130 "$cs" --tool $tool --kernel-name kns=megakernel \
    --error-exitcode 3 build/bin/cuda_test_megakernel \
    -tc="bf16 megakernel near the graph path*" > "$OUT/sanitize_$tool.log" 2>&1
  echo "$tool rc=$?"; tail -3 "$OUT/sanitize_$tool.log"
done
LOOM_BENCH_MEGA_SWEEPS=gemv_early_down \
  LOOM_BENCH_MEGA_TRACE="1,600,0;8,600,0" timeout 200 build/bin/cuda_bench "$OUT/sweeps.json" --megakernel > "$OUT/sweeps.log" 2>&1
echo "sweeps rc=$?"; grep -E "^\S|^ +[0-9]+: graph|^(1|8) " "$OUT/sweeps.log" | grep -v "^megakernel\|^  " | head -5
grep -E "\(batch|: graph" "$OUT/sweeps.log"
python3 scripts/mega_timeline.py "$OUT/sweeps.json" > "$OUT/timeline.txt"; cat "$OUT/timeline.txt" | grep -E "batch|qkv |attn_partial |o_proj |gate_up |down |along"
