#!/bin/bash
# Session 64, call 1: main a34acb9's megakernel (.device/m64.txz, a tests pack): ncu of one
# batch-8 step at ctx 7,000 (warp stalls and the source page by CUDA line: what a 256-key
# partition of AttnPartial costs now that its staging's divisions are gone), then the per-op
# traces at batch 8, ctx 600 and 7,000.
python3 -c "import tarfile; tarfile.open('.device/m64.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader > "$OUT/device.txt"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
LOOM_BENCH_MEGA_SWEEPS=none timeout 300 "$ncu" --kernel-name-base mangled \
  --kernel-name regex:Li8ELb1E --launch-skip 125 --launch-count 1 --clock-control none \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source yes \
  -o /tmp/b8 build/bin/cuda_bench /tmp/ncu_bench.json --megakernel > /tmp/ncu_run.log 2>&1
echo "ncu rc=$?"; grep -E "^(1|8) " /tmp/ncu_run.log
"$ncu" --import /tmp/b8.ncu-rep --page details --csv > "$OUT/details.csv" 2>&1
"$ncu" --import /tmp/b8.ncu-rep --page source --csv --print-source cuda,sass 2> /tmp/err.log |
  gzip -9 > "$OUT/src_cuda_sass.csv.gz"
echo "src rc=$? $(wc -c < "$OUT/src_cuda_sass.csv.gz")"; tail -2 /tmp/err.log
LOOM_BENCH_MEGA_SWEEPS=none LOOM_BENCH_MEGA_TRACE="8,7000,0;8,600,0" timeout 200 \
  build/bin/cuda_bench "$OUT/trace.json" --megakernel > "$OUT/trace.log" 2>&1
echo "trace rc=$?"; grep -A12 "^megakernel batch" "$OUT/trace.log"; grep -E "^(1|8) " "$OUT/trace.log"
