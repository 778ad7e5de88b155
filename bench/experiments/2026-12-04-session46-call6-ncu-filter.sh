#!/bin/bash
# Session 46, call 6 (carry .device/s46d.tgz, b4334be's cuda_bench): call 3's ncu of the fp32
# top-p filter (sigma 1, 256 rows) again after calls 4-5 (331 -> 295 us): how its three passes
# and the rest now split, for the next step toward 250 us.
python3 -c "import tarfile; tarfile.open('.device/s46d.tgz').extractall()"
W=/tmp/s46_6; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 200 "$NCU" --kernel-name regex:sample_filter_kernel --launch-skip 164 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section LaunchStats --section InstructionStats --section SourceCounters --import-source yes \
  -o "$W/filter" build/bin/cuda_bench /tmp/x.json --only sampling > "$W/filter_run.log" 2>&1
echo "ncu rc=$?"
"$NCU" -i "$W/filter.ncu-rep" --page details --csv > "$W/filter_details.csv" 2>&1
"$NCU" -i "$W/filter.ncu-rep" --page source --csv --print-source sass > "$W/filter_sass.csv" 2>&1
grep -E '"(Duration|Executed Instructions|No Eligible|Warp Cycles Per Issued Instruction)"' "$W/filter_details.csv" | cut -d, -f12-
rm -f "$W/filter.ncu-rep"
tar czf "$OUT/s46_6.tgz" -C "$W" .
