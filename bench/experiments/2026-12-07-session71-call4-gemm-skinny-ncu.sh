#!/bin/bash
# Session 71, call 4: Nsight Compute on the skinny GEMM (sk3 pack), qkv at m 256: the chosen
# 3 splits (spread fold; the 543rd gemm_skinny launch of cuda_bench --only gemm_skinny) and 1
# split (the 577th). Call 3 found the kernel's time nearly flat in the split count (19-20 us at
# S 1-3 against cuBLAS 11.7): a fixed cost or an aggregate limit, not the per-CTA ring.
set -u
. scripts/device_env.sh
unpack_pack "${SK:-.device/sk3.txz}" .
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -z "$ncu" ] && { echo "no ncu"; exit 0; }
for skip in 542 576; do
  timeout 200 "$ncu" --kernel-name regex:gemm_skinny --launch-skip $skip --launch-count 1 \
    --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats \
    --section LaunchStats --section Occupancy \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    build/bin/cuda_bench "$OUT/ncu_bench_$skip.json" --only gemm_skinny 2>&1 |
    grep -v "^==PROF==" > "$OUT/ncu_$skip.log"
  echo "skip $skip rc=$? at ${SECONDS}s"
  grep -E "Duration|Throughput|Memory \[%\]|L2 Cache|DRAM|Grid Size|Registers|stalled_(long|barrier|wait|short|math|mio|lg|sleep|branch|no_inst|dispatch|membar|misc|selected|tex|imc|drain)" "$OUT/ncu_$skip.log" | head -40
done
