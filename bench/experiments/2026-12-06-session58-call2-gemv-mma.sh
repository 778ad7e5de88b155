#!/bin/bash
# Session 58, call 2: the megakernel's GEMVs on the tensor cores at 4-8 slots
# (kernels/mega/gemv_mma.cuh) against the dot loop, and whether the refactor around it moved
# batch 1. Binaries: v5 = b09272e + the attention q·k lds128 patch (kept in call 1); v7 = v5 +
# gemv_mma (this session's working tree), each packed as in the session-57 script:
#   tar -cf - --transform "s,cuda_bench\$,cuda_bench_v7,;s,cuda_test_megakernel\$,cuda_test_megakernel_v7," \
#     build/bin/cuda_bench build/bin/cuda_test_megakernel | xz -T2 --lzma2=preset=6,dict=256MiB > .device/v7.txz
# v7 as run: the tests pack of the working tree (scripts/pack_device.sh tests build
# .device/s58t.txz: build/bin/cuda_bench and cuda_test_megakernel are v7), with v5's pack beside.
# Carry .device/s58t.txz and .device/v5.txz.
# Predictions: b8 ctx 600 3,110 -> ~1,500-1,700 us (skip_math 1 at b8 not measured before:
# the dot loop's cost); b1 unchanged within 10 us (the FMA path's code moved, same arithmetic).
python3 -c "
import tarfile
for p in ('.device/s58t.txz', '.device/v5.txz'):
    tarfile.open(p).extractall()"
. scripts/device_env.sh
W=/tmp/s58_2; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
cd build && ln -sf cuda_test_megakernel bin/cuda_test_megakernel_v7 && ln -sf cuda_bench bin/cuda_bench_v7 && cd ..
timeout 300 build/bin/cuda_test_megakernel_v7 > "$W/test_v7.log" 2>&1
echo "test v7 rc=$?"; grep -E "TEST CASE|ERROR|CHECK|assertions|Status" "$W/test_v7.log" | head -30
(cd build && timeout 400 ctest -L cuda -E megakernel --output-on-failure > "$W/ctest.log" 2>&1); echo "ctest rc=$?"; tail -4 "$W/ctest.log"
for r in 1 2; do
  for v in v5 v7; do
    LOOM_BENCH_MEGA_SWEEPS=none timeout 150 build/bin/cuda_bench_$v "$W/${v}_$r.json" --megakernel > "$W/${v}_$r.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -E "^(1|8) +[0-9]+ +(graph|mega)" "$W/${v}_$r.log"
  done
done
LOOM_BENCH_MEGA_SWEEPS=gemv_mma_b8,skip_math_b8 timeout 200 build/bin/cuda_bench_v7 "$W/v7_sweeps.json" --megakernel > "$W/v7_sweeps.log" 2>&1
echo "== v7 sweeps rc=$?"; grep -A5 -E "tensor cores|skip_math as above" "$W/v7_sweeps.log"
grep -E "^megakernel batch" -A14 "$W/v7_sweeps.log" | head -20
tar czf "$OUT/s58_2.tgz" -C "$W" .
