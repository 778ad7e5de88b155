#!/bin/bash
# Session 31's second device call (~2 minutes), no code change. Call 1's batch-8 step case: at
# ctx 4,000 attention is 0.72 ms of the 1.90 ms step (alone 26 µs a layer for 32 MB of KV, 1.2
# TB/s), at ctx 2,000 12.4 µs for 16 MB, at 600 8.5 µs for 4.8 MB. The split decode kernel
# (grid z from the block-table width) runs 16 partitions a pair at ctx 4,000: 512 blocks in 396
# slots, or blocks looping over two partitions without prefetch. The TMA kernel (pipelined, its
# chunked tail spread over a wave) is taken only from 256 (tile, kv head) pairs. This call times
# both kernels alone at batch 1-32 over the bench's contexts (`--attention-case`: split = the
# "mma" column, TMA configs 0-4 checked bitwise against it) and profiles the split kernel at b8
# ctx 4,000 with ncu.
# Build here first: make -C build -j3 && scripts/pack_device.sh run build .device/base.txz;
#   cp bench/experiments/2026-12-02-session31-call2.sh .device/run.sh
# carry .device/base.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c2; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for b in 1 4 8 16 32; do for c in 600 2000 4000 6000; do
  build/bin/cuda_bench "$OUT/att_${b}_$c.json" --attention-case $b $c > "$OUT/att_${b}_$c.log" 2>&1
  echo "b$b ctx $c rc=$?"; grep -E "TMA config [03]|mma " "$OUT/att_${b}_$c.log" | sed 's/attention decode //'
done; done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for c in 4000 600; do
timeout 120 "$NCU" --clock-control none --kernel-name regex:paged_attention_mma_decode --launch-skip 0 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats \
  -o "$OUT/split_b8_$c" build/bin/cuda_bench /tmp/x.json --attention-case 8 $c > "$OUT/ncu_run_$c.log" 2>&1
echo "ncu $c rc=$?"
"$NCU" -i "$OUT/split_b8_$c.ncu-rep" --page details --csv > "$OUT/split_b8_${c}_details.csv" 2>&1
grep -E '"(DRAM Throughput|Duration|Achieved Occupancy|Registers Per Thread|Issue Slots Busy|Warp Cycles Per Issued Instruction|L2 Hit Rate|No Eligible|Grid Size|Theoretical Occupancy|Stall Long Scoreboard|Dynamic Shared Memory Per Block)"' "$OUT/split_b8_${c}_details.csv" | cut -d, -f12- | head -20
done
tar czf "$FINAL/s31c2.tgz" -C "$OUT" .
