#!/bin/bash
# Session 60, call 12: ncu of one batch-8 megakernel step (bf16, tensor-core GEMVs; main's
# kernel with branch attn-marks' two trace-only stamps), warp-state samples per CUDA source
# line: session 60's marks put batch 8's attention unit at ~8.5 us from staged K/V to written
# partials, against ~2.5 us of shared-memory wavefronts counted by hand. Carry .device/s60x.txz.
python3 -c "import tarfile; tarfile.open('.device/s60x.txz').extractall()"
. scripts/device_env.sh
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/device.txt"
LOOM_BENCH_MEGA_SWEEPS=skip_math_b8 timeout 400 "$ncu" --kernel-name-base mangled \
  --kernel-name regex:Li8ELb1E --launch-skip 30 --launch-count 1 --clock-control none \
  --set full --import-source yes -o /tmp/b8 build/bin/cuda_bench /tmp/ncu_bench.json --megakernel \
  > "$OUT/ncu_run.log" 2>&1
echo "ncu rc=$?"; tail -3 "$OUT/ncu_run.log"
"$ncu" --import /tmp/b8.ncu-rep --page source --csv --print-source cuda > "$OUT/src_cuda.csv" 2> "$OUT/src_err.log"
echo "src rc=$? $(wc -c < "$OUT/src_cuda.csv")"; head -c 600 "$OUT/src_cuda.csv"; tail -3 "$OUT/src_err.log"
"$ncu" --import /tmp/b8.ncu-rep --page details --csv > "$OUT/details.csv" 2>/dev/null
echo "details $(wc -c < "$OUT/details.csv")"
