#!/bin/bash
# Session 35, call 1 (~7 minutes): `ctest -L cuda` on main (a9e8cca's rope_angle refactor: the
# split decode kernel's cubin unchanged, rope_pair's rebuilt; not GPU-run yet), then two variants
# of the split decode kernel: sx (bench/experiments/2026-12-03-attention-split-rope-cs-shuffled.patch:
# lane j computes angle j's sincosf, the other lanes' 8 pairs and the new key's shuffled from it,
# 1 sincosf a lane before the wait instead of 9; 149 -> 139 registers) and sy (sx + the position
# read by tile under fuse_rope, where tile i is slot i: the pre-wait chain tiles -> slot_start
# -> positions becomes one load; 147 registers). Aimed at session 34's probe: the last attention
# block's wait 2.59 us after the first. Their attention, backend and rope tests, then loom bench
# b1 and b2, three rounds, main / sx / sy interleaved. Predicted: b1 -0.5 to -1.5% (sy >= sx).
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend \
#     cuda_test_rope_attention" -o .device/sx.txz sx=<sx patch> sy=<sy patch>
#   cp this file .device/run.sh; carry .device/{base,sx}.txz and .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'sx')]"
DST=$OUT; W=/tmp/s35c1; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$W/ctest.log" | head -8)
tar czf "$DST/s35c1.tgz" -C "$W" .
for v in sx sy; do for t in cuda_test_attention cuda_test_cuda_backend cuda_test_rope_attention; do
  timeout 150 .device/$v/bin/$t > "$W/test_${v}_$t.log" 2>&1
  echo "$v $t rc=$? $(grep -E 'assertions' "$W/test_${v}_$t.log" | tr -s ' ')"
done; done
tar czf "$DST/s35c1.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for n in main sx sy; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 100 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-60 | tr '\n' '|')"
done; tar czf "$DST/s35c1.tgz" -C "$W" .; done
