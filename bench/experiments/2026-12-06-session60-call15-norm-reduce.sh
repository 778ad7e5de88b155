#!/bin/bash
# Session 60, call 15: RMSNorm's partials summed by warp 0 at 4-8 slots (branch norm-reduce)
# against main e885597 (FastDiv), alternated twice after cuda_test_megakernel; skip_math at b8.
# Predicted: b8 -10..-30 us (two stagings a layer); b1 unchanged (same SASS).
# Packs: .device/s60r.txz (norm-reduce, tests), .device/s60d.txz (main's kernel; into base/).
python3 -c "import tarfile; tarfile.open('.device/s60r.txz').extractall()"
mkdir -p base && (cd base && python3 -c "import tarfile; tarfile.open('../.device/s60d.txz').extractall()")
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
