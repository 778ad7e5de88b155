#!/bin/bash
# The megakernel's closing check on the device machine, as session 61's calls 7, 12 and 14 ran it:
# `ctest -L cuda` of a tests pack, compute-sanitizer memcheck and synccheck on the megakernel's
# launches in the bf16 comparison at 300-3,000 keys (1, 2, 4 and 8 slots), then cuda_bench
# --megakernel with the named sweeps and traces and scripts/mega_timeline.py on its timelines.
#   scripts/mega_check.sh PACK.txz [SWEEPS] [TRACES]   (PACK from scripts/pack_device.sh tests;
#   SWEEPS for LOOM_BENCH_MEGA_SWEEPS, default attn_apart_ab; TRACES for LOOM_BENCH_MEGA_TRACE,
#   default "1,600,0;8,600,0"; logs, JSON and timeline.txt under $OUT)
set -u
pack=$1 sweeps=${2:-attn_apart_ab} traces=${3:-1,600,0;8,600,0}
python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" "$pack"
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
LOOM_BENCH_MEGA_SWEEPS=$sweeps LOOM_BENCH_MEGA_TRACE=$traces timeout 200 build/bin/cuda_bench \
  "$OUT/sweeps.json" --megakernel > "$OUT/sweeps.log" 2>&1
echo "sweeps rc=$?"; grep -E "\(batch|: graph|^(1|8) " "$OUT/sweeps.log"
python3 scripts/mega_timeline.py "$OUT/sweeps.json" > "$OUT/timeline.txt"
grep -E "batch|qkv |attn_partial |o_proj |gate_up |down |along" "$OUT/timeline.txt"
