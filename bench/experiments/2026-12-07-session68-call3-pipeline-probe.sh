#!/bin/bash
# Session 68, issue 13: the two-group decode step probed (cuda_bench --pipeline-case, new this
# session): 22 layers of Terra's decode attention (TMA kernel, 64-slot blocks) and its four layer
# GEMMs (cuBLAS) for 256 sequences, serial on one stream (today's step without its small kernels)
# against two half-batch groups on two streams half a layer apart, so that one group's attention
# (HBM) can run beside the other's GEMMs (tensor cores). Predicted: if the block scheduler
# interleaves them (session 13's two-kernel probe hid 34 of 55 us of GEMMs at b128), the
# pipelined layer is below serial by up to the GEMMs' ~58 us of ~330 — unless half-batch
# attention streams worse than the full batch (session 13: b128 211 us against b256 274).
# Carry .device/pipe.txz (build/bin/cuda_bench of this session's tree).
set -u
python3 -c "import tarfile; tarfile.open('.device/pipe.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
for c in "256 8148 fp8" "256 4000 fp8" "256 12000 fp8" "256 8148 bf16"; do
  set -- $c
  p=""; [ "$2 $3" = "8148 fp8" ] && p="22 power"
  timeout 120 build/bin/cuda_bench "$OUT/pipeline_$1_$2_$3.json" --pipeline-case $1 $2 $3 ${p:-22} \
    2>&1 | grep -E "^pipeline" | tee -a "$OUT/pipeline.log"
done
timeout 60 build/bin/cuda_bench "$OUT/overlap_128.json" --overlap-case 128 8148 fp8 2>&1 |
  grep -E "^overlap" | tee -a "$OUT/pipeline.log"
# Half a batch's attention alone (why b128 reads ~2.7 TB/s where b256 reads ~4: the chunks' fold?)
for b in 256 128 64; do
  timeout 60 build/bin/cuda_bench "$OUT/attn_$b.json" --attention-case $b 8148 4 fp8 64 2>&1 |
    grep -E "TMA config|GB/s" | head -4 | tee -a "$OUT/pipeline.log"
done
echo "done at ${SECONDS}s"
