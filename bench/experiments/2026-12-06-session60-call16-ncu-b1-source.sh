#!/bin/bash
# Session 60, call 16: ncu of one batch-1 megakernel step (bf16, main fa11ade: FastDiv in),
# warp samples and instructions per CUDA line, as call 13 did at batch 8. Carry .device/s60m2.txz.
python3 -c "import tarfile; tarfile.open('.device/s60m2.txz').extractall()"
. scripts/device_env.sh
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
LOOM_BENCH_MEGA_SWEEPS=none timeout 300 "$ncu" --kernel-name-base mangled \
  --kernel-name regex:I13__nv_bfloat16Li1ELb0E --launch-skip 30 --launch-count 1 \
  --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section InstructionStats --section SourceCounters --import-source yes -o /tmp/b1 \
  build/bin/cuda_bench /tmp/ncu_bench.json --megakernel > "$OUT/ncu_run.log" 2>&1
echo "ncu rc=$?"
"$ncu" --import /tmp/b1.ncu-rep --page source --csv --print-source cuda,sass 2> /dev/null |
  gzip -9 > "$OUT/src_cuda_sass.csv.gz"
"$ncu" --import /tmp/b1.ncu-rep --page details --csv > "$OUT/details.csv" 2>/dev/null
echo "$(wc -c < "$OUT/src_cuda_sass.csv.gz") $(wc -c < "$OUT/details.csv")"
