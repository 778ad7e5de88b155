#!/bin/bash
# Session 47, call 4: why the persistent draw's temperature case is slower (call 3: f32 sigma 1
# 256 rows 245 us at one block an SM slot, 217.5 at one block an item, against 196 for call 1's
# "new" build). ncu of the draw kernel in the first timed temperature-0.9 f32 sigma-1 256-row
# call (launch 73 of sample_draw_kernel: 3 cases of 23 calls before it, then 1 + 2 warm-up), at
# the board's clocks, for call 1's build (.device/draw.tgz) and call 3's (.device/mult.tgz) with
# LOOM_DRAW_MULT=1000 and 1.
python3 -c "import tarfile; tarfile.open('.device/mult.tgz').extractall()"
mkdir -p draw && python3 -c "import tarfile; tarfile.open('.device/draw.tgz').extractall('draw')"
. scripts/device_env.sh
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
run() {  # name, binary, mult
  LOOM_DRAW_MULT=$3 timeout 150 "$NCU" --clock-control none --kernel-name regex:sample_draw_kernel \
    --launch-skip 72 --launch-count 1 --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section WarpStateStats --section InstructionStats --section SchedulerStats \
    -o /tmp/$1 $2 /tmp/x.json --only sampling > /tmp/$1.log 2>&1
  "$NCU" -i /tmp/$1.ncu-rep --page details --csv > "$OUT/$1.csv" 2>&1
  echo "== $1"
  python3 - "$OUT/$1.csv" <<'PY'
import csv, sys
for r in csv.reader(open(sys.argv[1])):
    if len(r) > 14 and r[12] in ("Duration", "Grid Size", "Registers Per Thread", "Achieved Occupancy",
        "Executed Instructions", "Issue Slots Busy", "No Eligible", "Active Warps Per Scheduler",
        "Eligible Warps Per Scheduler", "Warp Cycles Per Issued Instruction", "Theoretical Occupancy",
        "Block Limit Registers", "Block Limit Shared Mem", "Compute (SM) Throughput", "Memory Throughput", "SM Frequency"):
        print(f"  {r[12]:40s} {r[14]:>14s} {r[13]}")
PY
}
run old draw/build/bin/cuda_bench 1
run item build/bin/cuda_bench 1000
run persistent build/bin/cuda_bench 1
