#!/bin/bash
# Session 69: the prefill kernel's ring depth and register build (AttentionArgs::prefill_stages,
# prefill_blocks_per_sm; 5e7b397). The mixed steps of a 256-job run (a prompt chunk of ~1,900
# slots beside the decoding sequences, ~233 of them) took 4.9 ms of ~12 ms in attention in
# session 19's profile: the prefill kernel at ~108 TFLOP/s, 2 tiles in flight a block and, in
# e4m3, 176 registers (2 blocks of 4 warps an SM). Predicted: 4 stages and 3 blocks an SM cut
# the kernel's time by a third or more (the bits unchanged), and loom bench's mixed steps with it.
# Pack .device/pf.txz (scripts/variant_build.sh -t "loom cuda_bench cuda_test_attention"
# main=main s4=…-prefill-stages-4.patch s4b3=…-prefill-stages-4-blocks-3.patch): main (defaults
# 2 stages, ptxas's registers), s4 (4 stages), s4b3 (4 stages, 3 blocks an SM).
# ROUNDS (default 2): rounds of the three loom bench runs; NCU=1 adds an ncu profile (below).
set -u
. scripts/device_env.sh
unpack_pack .device/pf.txz .
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
mkdir -p "$OUT/pf"
B=.device/main/bin
timeout 120 $B/cuda_test_attention > "$OUT/pf/test_attention.log" 2>&1
echo "cuda_test_attention rc=$? at ${SECONDS}s"; grep -E "assertions|Status" "$OUT/pf/test_attention.log"
for c in "1746 1 bf16" "1746 1 fp8" "1746 8 fp8"; do
  set -- $c
  timeout 120 $B/cuda_bench "$OUT/pf/prefill_${1}_${2}_${3}.json" --prefill-case $c 2>&1 |
    grep "attention prefill" | tee -a "$OUT/pf/prefill_case.log"
done
echo "prefill cases at ${SECONDS}s"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for r in $(seq 1 "${ROUNDS:-2}"); do
  for v in main s4 s4b3; do
    log=$OUT/pf/bench_${v}_$r
    timeout 120 .device/$v/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 2 \
      --context-frames 3 --batch-sizes 1 --num-jobs 256 --json "$log.json" > "$log.log" 2>&1
    echo "$v r$r rc=$? at ${SECONDS}s"; grep -E "^ +256 " "$log.log" | tail -1
  done
done
# NCU=1: Nsight Compute on the default build's prefill kernel (1,746 slots, e4m3; its first
# timed launch): where its warps stall, for the next design step.
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ "${NCU:-0}" = 1 ] && [ -n "$ncu" ]; then
  timeout 240 "$ncu" --kernel-name regex:paged_attention_mma_kernel --launch-skip 1 \
    --launch-count 1 --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    $B/cuda_bench "$OUT/pf/ncu_prefill.json" --prefill-case 1746 1 fp8 2>&1 |
    grep -v "^==PROF==" > "$OUT/pf/ncu_prefill.log"
  echo "ncu rc=$? at ${SECONDS}s"; grep -E "Stall|Throughput|Occupancy|Registers" \
    "$OUT/pf/ncu_prefill.log" | head -30
fi
tar -czf "$OUT/pf.tgz" -C "$OUT" pf && rm -r "$OUT/pf"
