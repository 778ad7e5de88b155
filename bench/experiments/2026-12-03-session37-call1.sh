#!/bin/bash
# Session 37, call 1 (~3.5 minutes). `ctest -L cuda` on main (2d6ddec: the spread fold's wait and
# the megakernel's sync on common.cuh's shared spin helpers, not GPU-run before), then session
# 36's prepared call 4: pf (bench/experiments/2026-12-03-gemv-pair-flags-no-copies-ahead.patch),
# session 36's pa0 (the o + gate/up pair kernel, release before the first gate/up batch, nothing
# copied ahead: b1 +5.0% against main) with the meeting by one flag a block (st.release of the
# launch's epoch; warp 0 polls all flags with ld.acquire) instead of 132 atomics on one word.
# Predicted: pf within +-1% of main if the serialised atomics were the meeting's cost.
# Build: make; scripts/pack_device.sh tests build .device/base.txz; scripts/variant_build.sh -t
#   "loom cuda_test_gemv" -o .device/pf.txz pf=<patch>; carry .device/{base,pf}.txz, .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'pf')]"
DST=$OUT; W=/tmp/s37c1; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 240 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?"; grep -E "tests passed|tests failed" "$W/ctest.log")
timeout 60 .device/pf/bin/cuda_test_gemv > "$W/test_pf_cuda_test_gemv.log" 2>&1
echo "pf cuda_test_gemv rc=$? $(grep -E 'assertions' "$W/test_pf_cuda_test_gemv.log" | tr -s ' ')"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for n in main pf; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 60 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done; tar czf "$DST/s37c1.tgz" -C "$W" .; done
