#!/bin/bash
# Session 35, call 4 (~3 minutes): the o GEMV at one row built beside attention (88 registers,
# bench/experiments/2026-12-03-gemv-o-beside-attention-again.patch), so that its blocks become
# resident beside the split decode kernel's and hold o's whole weight matrix in registers before
# their wait. Session 33 measured +0.3% at b1; since then the attention blocks' work before and
# after their wait shrank (calls 1-2). Its backend test, then loom bench b1, three rounds against
# main. Predicted: b1 -0.5 to +0.5%.
# Build here first: make -C build -j$(nproc) && scripts/variant_build.sh -t "loom \
#   cuda_test_cuda_backend" -o .device/sx.txz ob=<patch>; carry .device/{base,sx}.txz, run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'sx')]"
DST=$OUT; W=/tmp/s35c4; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
timeout 150 .device/ob/bin/cuda_test_cuda_backend > "$W/test_ob_cuda_test_cuda_backend.log" 2>&1
echo "ob backend rc=$? $(grep -E 'assertions' "$W/test_ob_cuda_test_cuda_backend.log" | tr -s ' ')"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for n in main ob; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 60 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done; tar czf "$DST/s35c4.tgz" -C "$W" .; done
