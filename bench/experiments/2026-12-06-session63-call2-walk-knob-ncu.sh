#!/bin/bash
# Session 63, call 2: branch attn-walk2 (.device/s63w2.txz: the K/V staging at 4-8 slots with
# one block-table entry a key, eight loaded together; the 128-key walk as a knob) against main
# (.device/s63base.txz) by scripts/mega_ab.sh with the walk alternated off / on at batch 8,
# ctx 600 / 3,000 / 7,000; then ncu of one batch-8 step at ctx 7,000 on the branch (walk on):
# warp stalls and the source page per SASS instruction with its CUDA line.
bash scripts/mega_ab.sh .device/s63w2.txz .device/s63base.txz attn_walk_b8,attn_walk_b8_3000,attn_walk_b8_7000
grep -A5 "walks in 128" "$OUT/all.log" | head -48
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
LOOM_BENCH_MEGA_SWEEPS=none timeout 300 "$ncu" --kernel-name-base mangled \
  --kernel-name regex:Li8ELb1E --launch-skip 125 --launch-count 1 --clock-control none \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source yes \
  -o /tmp/b8 build/bin/cuda_bench /tmp/ncu_bench.json --megakernel > "$OUT/ncu_run.log" 2>&1
echo "ncu rc=$?"
"$ncu" --import /tmp/b8.ncu-rep --page details --csv > "$OUT/details.csv" 2>&1
grep -E "\"Duration\"|DRAM Throughput|Issue Slots Busy" "$OUT/details.csv" | head
"$ncu" --import /tmp/b8.ncu-rep --page source --csv --print-source cuda,sass 2> "$OUT/err.log" |
  gzip -9 > "$OUT/src_cuda_sass.csv.gz"
echo "src rc=$? $(wc -c < "$OUT/src_cuda_sass.csv.gz")"; tail -2 "$OUT/err.log"
