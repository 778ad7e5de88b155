#!/bin/bash
# Prepared in session 46, not run (no device time was left). Two parts:
# 1. (carry .device/s46e.tgz: main's cuda_bench, CUDA module and sampling tests; rebuild with
#    `cmake --build build && tar czf .device/s46e.tgz build/bin/cuda_bench
#    build/bin/cuda_test_sampling build/bin/cuda_test_sampling_noise build/bin/libloom-cuda.so
#    build/bin/libsimdjson.so.*` if lost) what the draw and final kernels
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
# 2. Where .device/draw.tgz exists (the same files built with
#    bench/experiments/2026-12-04-draw-leaves-drawn-rows.patch applied: a drawn row's 64 draw
#    blocks leave after reading the filter's result, sample_final takes the token from it),
#    the sampling check of both builds. Predicted from the estimate in bench/NOTES-cuda.md
#    (session 46): fp32 top-p 287 -> ~240-260 us, bf16 top-p 202 -> ~170-190, temperature and
#    greedy unchanged (their blocks read the filter's result first, then the parameters: the
#    same two loads in the other order; ptxas 56 -> 58 registers for fp32, 4 blocks an SM).
if [ -f .device/draw.tgz ]; then
  mkdir -p draw && python3 -c "import tarfile; tarfile.open('.device/draw.tgz').extractall('draw')"
  mkdir -p base && cp -r build base/
  BUILD=draw/build BASE=base/build REPEATS=2 scripts/sampling_check.sh
fi
