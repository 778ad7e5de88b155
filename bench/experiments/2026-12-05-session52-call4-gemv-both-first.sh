#!/bin/bash
# Session 52, call 4 (~4 minutes): the one-row FMA GEMV with both register batches of weights in
# flight before its PDL wait (bench/experiments/2026-12-05-gemv-second-batch-before-wait-not-kept.patch;
# the second was issued after the input's staging). Why: call 2's step split puts the layer
# GEMVs at 64% of copy together, +1.5-3 us a kernel over their bytes; the next kernel's blocks
# become resident at the previous one's trigger and can have 2 x 8 x 16 bytes a lane in flight
# instead of 8 x 16 while they wait. ptxas: the plain one-row kernels 104-120 -> 104-128
# registers, 0 spills (one 512-thread block an SM either way); the beside-attention build (88)
# and the tensor-core GEMV keep the old order. Predicted: batch 1 -1 to -4%, batch 8 (GEMM
# path) unchanged. Carry .device/s52g.txz (tests pack, the patch applied on 2dd7236's tree) and
# .device/s52.txz (main's GPU code). Tests first (gemv, backend), then loom bench b1/b8
# alternated twice, main and the probe.
mkdir -p m && python3 -c "
import tarfile
tarfile.open('.device/s52.txz').extractall('m')
tarfile.open('.device/s52g.txz').extractall()"
W=/tmp/s52_4; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 150 ctest -R "gemv|cuda_backend|megakernel" --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
tail -4 "$W/ctest.log"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > "$W/ckpt.log" 2>&1
for r in 1 2; do
  for v in main probe; do
    bin=build/bin/loom; [ $v = main ] && bin=m/build/bin/loom
    timeout 100 $bin bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,8 \
      --json "$W/b18_$v$r.json" > "$W/b18_$v$r.log" 2>&1
    echo "$v$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/b18_$v$r.log" | tr -s ' ' | cut -c1-30 | tr '\n' '|')"
  done
  tar czf "$OUT/s52_4.tgz" -C "$W" .
done
