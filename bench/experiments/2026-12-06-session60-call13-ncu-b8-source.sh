#!/bin/bash
# Session 60, call 13: call 12's ncu of one batch-8 megakernel step again, the source page
# exported per SASS instruction with its CUDA line (call 12's CUDA-only export came without
# metric columns). Carry .device/s60x.txz.
python3 -c "import tarfile; tarfile.open('.device/s60x.txz').extractall()"
. scripts/device_env.sh
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
LOOM_BENCH_MEGA_SWEEPS=skip_math_b8 timeout 300 "$ncu" --kernel-name-base mangled \
  --kernel-name regex:Li8ELb1E --launch-skip 30 --launch-count 1 --clock-control none \
  --section WarpStateStats --section SourceCounters --import-source yes -o /tmp/b8 \
  build/bin/cuda_bench /tmp/ncu_bench.json --megakernel > "$OUT/ncu_run.log" 2>&1
echo "ncu rc=$?"
for p in sass cuda,sass; do
  "$ncu" --import /tmp/b8.ncu-rep --page source --csv --print-source $p 2> "$OUT/err_$p.log" |
    gzip -9 > "$OUT/src_${p/,/_}.csv.gz"
  echo "$p rc=$? $(wc -c < "$OUT/src_${p/,/_}.csv.gz")"; tail -2 "$OUT/err_$p.log"
done
zcat "$OUT/src_sass.csv.gz" | head -3 | cut -c1-400
