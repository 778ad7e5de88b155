#!/bin/bash
# Session 63, call 3: ncu of one batch-8 megakernel step at ctx 7,000 on branch attn-walk2
# (.device/s63w3.txz: the new K/V staging, 256-key partitions, the walk off), warp stalls and the
# source page per SASS instruction with its CUDA line (call 2's source page was not returned:
# $OUT held more files than come back). Where a 256-key partition's ~8.6 us goes.
python3 -c "import tarfile; tarfile.open('.device/s63w3.txz').extractall()"
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
