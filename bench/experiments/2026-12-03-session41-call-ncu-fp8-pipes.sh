#!/bin/bash
# Prepared in session 40 for session 41 (~3 minutes; carry main's run pack as .device/base.txz,
# extracts to .device/main/bin).
# Why FP8 attention alone reads ~3.9 TB/s at b256 ctx 8,000 where bf16 reads 4.29: two readings
# (bench/NOTES-cuda.md, session 40). (a) the e4m3 -> f16 conversions (F2FP) saturate a pipe;
# (b) a tile's fixed work, the same for 8 KB of e4m3 as for 16 KB of bf16, is paid twice a byte.
# ncu of the TMA decode kernel (config 0: the case's first TMA launch; the function name in the details says which build) for both
# dtypes, clocks free: the pipe utilisation (ComputeWorkloadAnalysis), the instruction mix
# (InstructionStats), the stall reasons (WarpStateStats) and the source counters (which lines
# the stalls sit on). If the conversion pipe is near its peak in FP8 only, (a); if FP8's issue
# slots and stalls look like bf16's at twice the instructions a byte, (b).
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
DST=$OUT; W=/tmp/s41n; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for kv in fp8 bf16; do
  extra=""; [ $kv = fp8 ] && extra="fp8"
  timeout 200 "$NCU" --clock-control none --kernel-name regex:paged_attention_tma_decode \
    --launch-skip 0 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    --section SourceCounters --import-source yes \
    -o "$W/tma_b256_$kv" .device/main/bin/cuda_bench /tmp/x.json --attention-case 256 8000 4 $extra \
    > "$W/ncu_run_$kv.log" 2>&1
  echo "ncu $kv rc=$?"
  "$NCU" -i "$W/tma_b256_$kv.ncu-rep" --page details --csv > "$W/tma_b256_${kv}_details.csv" 2>&1
  grep -E '"(Duration|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued Instruction|No Eligible|Achieved Occupancy|Registers Per Thread|Grid Size|Executed Instructions|Stall Long Scoreboard|Stall Wait|Stall Barrier|Stall Math Pipe Throttle|Stall Short Scoreboard)"' \
    "$W/tma_b256_${kv}_details.csv" | cut -d, -f12- | head -24
  "$NCU" -i "$W/tma_b256_$kv.ncu-rep" --page raw --csv \
    --metrics 'regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active|regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active|smsp__inst_executed.sum|launch__func_cache_config' \
    > "$W/tma_b256_${kv}_pipes.csv" 2>&1
  tar czf "$DST/s41n.tgz" -C "$W" .
done
