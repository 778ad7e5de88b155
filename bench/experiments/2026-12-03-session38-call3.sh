#!/bin/bash
# Session 38, call 3 (~6 minutes). fr (bench/experiments/2026-12-03-tma-fused-rope.patch): the TMA
# decode kernel's 2-stage builds over a bf16 cache do rope_kv_write's work themselves, as the
# split kernel does at batch 1-3 (fuse_rope): the angles before griddepcontrol.wait, q rotated as
# it is loaded, every tile issued before the wait, and the warp whose tile holds key p overwrites
# that row with the rotated key and the value it also writes to the cache. The kernel then
# follows the qkv GEMV directly: one kernel and one PDL boundary fewer a layer. Call 1's probe
# (b8): qkv's end -> the attention warps past their wait 5.8 us, rope_kv_write between.
# 1. ctest -L cuda on fr's build (the fused-RoPE test now runs TMA configs 0, 3, 4, 5 against
#    the split kernel's fused step, output and K / V caches bitwise).
# 2. cuda_bench --step-case 8 2000,5000: main and fr.
# 3. loom bench b1, 4, 8, 16: main and fr, two rounds.
# Predicted: qkv end -> wait 5.8 -> ~1.5 us; b4-b16 -3 to -6%, b1 unchanged (split kernel).
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('fr_tests', 'ab', 'fr')]"
DST=$OUT; W=/tmp/s38c3; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest_fr.log" 2>&1; echo "ctest fr rc=$?"; grep -E "tests passed|tests failed|Failed|\*\*\*" "$W/ctest_fr.log" | head)
tar czf "$DST/s38c3.tgz" -C "$W" .
for n in main fr; do
  timeout 90 .device/$n/bin/cuda_bench "$W/step_${n}_b8.json" --step-case 8 2000,5000 > "$W/step_${n}_b8.log" 2>&1
  echo "$n step b8 rc=$?"; grep -E "without nothing|without attention  |without all but attention" "$W/step_${n}_b8.log"
done
tar czf "$DST/s38c3.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name round
  timeout 150 .device/$1/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,4,8,16 --json "$W/bench_$1_$2.json" > "$W/bench_$1_$2.log" 2>&1
  echo "$1 r$2 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$2.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run main $r; run fr $r; tar czf "$DST/s38c3.tgz" -C "$W" .; done
