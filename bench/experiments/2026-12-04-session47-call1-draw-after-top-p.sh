#!/bin/bash
# Session 47, call 1: session 46's prepared call 10 (2026-12-04-session46-call10-ncu-draw-after-
# top-p.sh) for both builds. Carry .device/s46e.tgz (main at 939e800: cuda_bench, CUDA module,
# sampling tests) and .device/draw.tgz (the same files with
# bench/experiments/2026-12-04-draw-leaves-drawn-rows.patch applied). For each build: ncu
# durations of the filter and the draw after it, fp32 top-p 0.9, 256 rows, sigma 1 (the 165th
# call), at the board's clocks; then the sampling check of both builds alternated.
python3 -c "import tarfile; tarfile.open('.device/s46e.tgz').extractall()"
mkdir -p draw && python3 -c "import tarfile; tarfile.open('.device/draw.tgz').extractall('draw')"
mkdir -p base && cp -r build base/
. scripts/device_env.sh
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for b in base draw; do
  W=/tmp/s47_1_$b; rm -rf "$W"; mkdir -p "$W"
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
  timeout 150 "$NCU" --clock-control none --kernel-name "regex:sample_(draw|filter)_kernel" \
    --launch-skip 328 --launch-count 2 --section SpeedOfLight --section LaunchStats -o "$W/k" \
    $b/build/bin/cuda_bench /tmp/x.json --only sampling > "$W/k_run.log" 2>&1
  echo "$b ncu rc=$?"
  "$NCU" -i "$W/k.ncu-rep" --page details --csv > "$W/k_details.csv" 2>&1
  grep -E '"(Duration|Grid Size|SM Frequency|Registers Per Thread)"' "$W/k_details.csv" | cut -d, -f5,12- | sed 's/"//g'
  rm -f "$W/k.ncu-rep"
  tar czf "$OUT/s47_1_$b.tgz" -C "$W" .
done
BUILD=draw/build BASE=base/build REPEATS=2 scripts/sampling_check.sh
