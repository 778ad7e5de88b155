#!/bin/bash
# Session 46, call 10 (carry .device/s46e.tgz, 939e800's build): what the draw and final kernels
# cost after an fp32 top-p filter that drew every row itself (sample_draw_kernel's 64 x 256
# blocks: chunk 0 passes the filter's token on, 63 exit), against the filter's own time: the
# sampling bench times all three. ncu of the first timed call of fp32 top-p 0.9, 256 rows, sigma 1
# (the 165th call: 164 launches of each kernel before it), the filter and the draw in one ncu run
# (--clock-control none: the board's clocks).
python3 -c "import tarfile; tarfile.open('.device/s46e.tgz').extractall()"
W=/tmp/s46_10; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 150 "$NCU" --clock-control none --kernel-name "regex:sample_(draw|filter)_kernel" \
  --launch-skip 328 --launch-count 2 --section SpeedOfLight --section LaunchStats -o "$W/k" \
  build/bin/cuda_bench /tmp/x.json --only sampling > "$W/k_run.log" 2>&1
echo "ncu rc=$?"
"$NCU" -i "$W/k.ncu-rep" --page details --csv > "$W/k_details.csv" 2>&1
grep -E '"(Duration|Grid Size|SM Frequency)"' "$W/k_details.csv" | cut -d, -f5,12- | sed 's/"//g'
rm -f "$W/k.ncu-rep"
tar czf "$OUT/s46_10.tgz" -C "$W" .
