#!/bin/bash
# Session 46, call 3 (carry .device/s46b.txz): ncu of the two sampling kernels issue 13 still
# counts, for the next session's designs.
# 1. fp32 top-p 0.9 alone at 256 rows, sigma 1 (347 us against 250): sample_filter_kernel<float>,
#    the first timed launch of that mode in `cuda_bench --only sampling` (modes in sampling.cpp's
#    order, rows 1 then 256, each mode a check call + 2 warm-ups + 20 timed: 7 x 23 + 3 launches
#    before it). Where the three passes (zmax, quanta counts, gather) spend their instructions
#    and stalls, by source line.
# 2. The benchmark sampler's draw over bf16 logits at 256 rows (temperature 0.9, sigma 1):
#    sample_draw_kernel<bf16>, 27 x 23 + 3 launches before it. The step case puts lm_head + draw
#    at ~0.455 J of a 5.43 J step under the cap (call 1), the draw ~0.10 ms at full clock.
python3 -c "import tarfile; tarfile.open('.device/s46b.txz').extractall()"
W=/tmp/s46_3; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
save() { tar czf "$OUT/s46_3.tgz" -C "$W" .; }
prof() {  # name kernel-regex skip
  timeout 200 "$NCU" --kernel-name "regex:$2" --launch-skip "$3" --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats \
    --section SourceCounters --import-source yes \
    -o "$W/$1" build/bin/cuda_bench /tmp/x.json --only sampling > "$W/$1_run.log" 2>&1
  echo "ncu $1 rc=$?"
  "$NCU" -i "$W/$1.ncu-rep" --page details --csv > "$W/$1_details.csv" 2>&1
  "$NCU" -i "$W/$1.ncu-rep" --page source --csv --print-source sass > "$W/$1_sass.csv" 2>&1
  "$NCU" -i "$W/$1.ncu-rep" --page source --csv --print-source cuda > "$W/$1_cuda.csv" 2>&1
  grep -E '"(Duration|DRAM Throughput|Achieved Occupancy|Registers Per Thread|Issue Slots Busy|Warp Cycles Per Issued Instruction|No Eligible|Grid Size|Block Size|Executed Instructions|Dynamic Shared Memory Per Block|SM Frequency)"' \
    "$W/$1_details.csv" | cut -d, -f12- | head -20
  save
}
prof filter_f32_top_p sample_filter_kernel 164
prof draw_bf16_temperature sample_draw_kernel 624
grep -E "top-p 0.9 +f32 +sigma 1 256|temperature 0.9 +bf16 +sigma 1 256" "$W/filter_f32_top_p_run.log" | head -4
save
