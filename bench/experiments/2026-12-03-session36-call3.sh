#!/bin/bash
# Session 36, call 3 (~6 minutes). `ctest -L cuda` on main (328228d's spread fold + the call-2
# records), the bench b1-b8 one round on main, and call 2's pair kernel once more with its
# meeting's release moved before the gate/up weights' first batch (a release waits for the
# thread's loads in flight: in call 2 thread 0's own weight loads, ~1-2 us under load, sat on
# every block's path to the meeting): pa0 with no rows copied ahead, pa1 with one row a warp
# (64 KB an SM instead of 192: session 32 saw a 192 KB block next to attention cost attention
# ~5 us a layer, and call 2's three rows cost 8% more than none).
# Predicted: pa0 ~main (+0 to +2%: the meeting ~0.7 us slower than the PDL release, the
# gate/up launch saved), pa1 main -0 to -3% if the copies ahead are not paid elsewhere.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom cuda_test_gemv" -o .device/pa.txz \
#     pa1=bench/experiments/2026-12-03-gemv-pair-arrive-first-one-row-ahead.patch \
#     pa0=bench/experiments/2026-12-03-gemv-pair-arrive-first-no-copies-ahead.patch
#   cp this file .device/run.sh; carry .device/{base,pa}.txz and .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'pa')]"
DST=$OUT; W=/tmp/s36c3; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
timeout 150 .device/pa1/bin/cuda_test_gemv > "$W/test_pa1_cuda_test_gemv.log" 2>&1
echo "pa1 cuda_test_gemv rc=$? $(grep -E 'assertions' "$W/test_pa1_cuda_test_gemv.log" | tr -s ' ')"
(cd build && timeout 240 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?"; grep -E "tests passed|tests failed" "$W/ctest.log")
tar czf "$DST/s36c3.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1; do
  timeout 150 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8 \
    --json "$W/bench_main8_$r.json" > "$W/bench_main8_$r.log" 2>&1
  echo "main8 r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_main8_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done
for r in 1 2 3; do for n in main pa0 pa1; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 100 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done; tar czf "$DST/s36c3.tgz" -C "$W" .; done
