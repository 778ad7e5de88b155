#!/bin/bash
# Session 35, call 3 (~7 minutes): `ctest -L cuda` on main (02fd3b1: calls 1-2's split decode
# kernel changes), then step inputs read before griddepcontrol.wait: tm
# (bench/experiments/2026-12-03-attention-tma-step-inputs-before-wait.patch: the TMA decode
# kernel's slot_start load, whose value q's address needs, the KV scales and the next tile's
# block-table lookups, all after the wait before) and both (tm + the split kernel's new-key
# cache row, ...-split-cache-slot-before-wait.patch). Their attention, backend and rope tests,
# then loom bench b1, 2, 4, 8, two rounds, main / tm / both interleaved. Predicted: b4/b8 -0.5
# to -1.5% (one L2 round trip less after the wait a layer), b1/b2 within noise.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend \
#     cuda_test_rope_attention" -o .device/sx.txz tm=<patch> both=<patch>
#   cp this file .device/run.sh; carry .device/{base,sx}.txz and .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'sx')]"
DST=$OUT; W=/tmp/s35c3; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$W/ctest.log" | head -8)
tar czf "$DST/s35c3.tgz" -C "$W" .
for v in tm both; do for t in cuda_test_attention cuda_test_cuda_backend cuda_test_rope_attention; do
  timeout 150 .device/$v/bin/$t > "$W/test_${v}_$t.log" 2>&1
  echo "$v $t rc=$? $(grep -E 'assertions' "$W/test_${v}_$t.log" | tr -s ' ')"
done; done
tar czf "$DST/s35c3.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for n in main tm both; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 150 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done; tar czf "$DST/s35c3.tgz" -C "$W" .; done
