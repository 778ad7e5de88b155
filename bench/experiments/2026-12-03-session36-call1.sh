#!/bin/bash
# Session 36, call 1 (prepared in session 35, ~5 minutes): the split decode kernel's fold spread
# over the (tile, kv head)'s active blocks (sf, bench/experiments/2026-12-03-attention-split-spread-fold.patch;
# the launcher sets AttentionArgs::spread_fold where every partition has its own block and the
# grid is one wave: batch 1). Every active block counts in, waits (thread 0, ld.acquire, traps
# after 2 s), copies its ~3 items' partials of every partition by L2 loads in flight together
# and merges them (the same merges in the same order: the same bits), counts out; the last
# out resets the counter. 149 registers (the qkv GEMV still fits beside). Session 35's probe:
# the fold 5.04 us of attention's 10.37 (the last block copying 52.8 KB ~2.4, merging ~1.25).
# Predicted: the fold ~5.0 -> ~3 us, b1 -1.5 to -3%; b2+ unchanged (not one wave of one
# partition a block). Tests first (a hang would trap, not stall the call), then b1/b2 three
# rounds against main. If kept: `ctest -L cuda`, then re-probe (the s35 probe patch stamps the
# fold's start and end in the last block only; rebase it).
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend \
#     cuda_test_rope_attention cuda_test_gemv" -o .device/sf.txz sf=<patch>
#   cp this file .device/run.sh; carry .device/{base,sf}.txz and .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'sf')]"
DST=$OUT; W=/tmp/s36c1; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
for t in cuda_test_attention cuda_test_rope_attention cuda_test_cuda_backend cuda_test_gemv; do
  timeout 150 .device/sf/bin/$t > "$W/test_sf_$t.log" 2>&1
  echo "sf $t rc=$? $(grep -E 'assertions' "$W/test_sf_$t.log" | tr -s ' ')"
done
tar czf "$DST/s36c1.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for n in main sf; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 100 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done; tar czf "$DST/s36c1.tgz" -C "$W" .; done
