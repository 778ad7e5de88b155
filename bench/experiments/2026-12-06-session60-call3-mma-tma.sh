#!/bin/bash
# Session 60, call 3: the tensor-core GEMVs' segments as one TMA box each (branch mma-tma:
# 3-D tensor maps {64 columns, rows, chunks} with the 128-byte swizzle, a launch parameter),
# against main (3eb72e9), alternated twice in one call after cuda_test_megakernel (f32 and
# bf16 comparisons, 1,000 jittered replays at batch 8 on the tensor-core path).
# Call 2 measured the bound: batch 8 with neither math nor waits 2,062-2,108 us (15 copies a
# segment) against 1,572 with one (wrong) 4 KB copy. Predicted: b8 skip_math 3 ~1,600 us, the
# b8 step 2,600 -> ~2,150-2,300 us; b1 unchanged (its kernel's code moved: within ~20 us).
# Packs: scripts/pack_device.sh tests build .device/s60n.txz (this branch);
# (cd /tmp/wt-main && scripts/pack_device.sh run build /work/main/.device/base60.txz) (main).
python3 -c "import tarfile; tarfile.open('.device/s60n.txz').extractall()"
mkdir -p base && (cd base && python3 -c "import tarfile; tarfile.open('../.device/base60.txz').extractall()")
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 150 build/bin/cuda_test_megakernel > "$OUT/test.log" 2>&1
echo "test rc=$?"; grep -E "ERROR|error|assertions|Status" "$OUT/test.log" | head
for r in 1 2; do
  for v in base new; do
    bin=build/bin/cuda_bench
    [ $v = base ] && bin=base/build/bin/cuda_bench
    echo "== $v round $r" >> "$OUT/all.log"
    LOOM_BENCH_MEGA_SWEEPS=skip_math_b8 timeout 110 $bin "$OUT/${v}_$r.json" --megakernel >> "$OUT/all.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -A12 "== $v round $r" "$OUT/all.log" | grep -E "^(1|8) .*mega"
    grep -A5 "skip_math as above" "$OUT/all.log" | tail -4
  done
done
