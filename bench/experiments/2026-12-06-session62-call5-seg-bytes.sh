#!/bin/bash
# Session 62, call 5: the CUDA-core GEMVs' segments at 4 KB (main 27c1ebf, .device/s62m.txz),
# 2 KB (branch seg2k, .device/s62k.txz) and 1 KB (seg2k with kGemvFmaSegBytes 1024,
# .device/s62j.txz), alternated twice after each build's cuda_test_megakernel; the steps table
# plus gemv_early {1,2,3} and gemv_inflight {1,2,3} at batch 1 and attn_apart at batch 2.
# Predicted (the L2 probe, call 4: hits at ~1 us with 8 MB in flight, ~0.3 us at 4 MB, HBM at
# ~3 TB/s either way): batch 1 and 2 -3..-8% at 2 KB; 1 KB's doubled copies a byte cost more.
set -u
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
for v in m k j; do
  mkdir -p v$v && (cd v$v && python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" ../.device/s62$v.txz)
  timeout 150 v$v/build/bin/cuda_test_megakernel > "$OUT/test_$v.log" 2>&1
  echo "test $v rc=$?"; grep -E "assertions" "$OUT/test_$v.log"
done
for r in 1 2; do
  for v in m k j; do
    echo "== $v round $r" >> "$OUT/all.log"
    LOOM_BENCH_MEGA_SWEEPS=gemv_early,gemv_inflight,attn_apart_b2 timeout 110 v$v/build/bin/cuda_bench "$OUT/${v}_$r.json" --megakernel >> "$OUT/all.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -A12 "== $v round $r" "$OUT/all.log" | grep -E "^(1|8) .*mega"
  done
done
