#!/bin/bash
# Session 36, call 1 (prepared in session 35, ~7 minutes). Two variants. (1) sf: the split decode kernel's fold spread
# over the (tile, kv head)'s active blocks (sf, bench/experiments/2026-12-03-attention-split-spread-fold.patch;
# the launcher sets AttentionArgs::spread_fold where every partition has its own block and the
# grid is one wave: batch 1). Every active block counts in, waits (thread 0, ld.acquire, traps
# after 2 s), copies its ~3 items' partials of every partition by L2 loads in flight together
# and merges them (the same merges in the same order: the same bits), counts out; the last
# out resets the counter. 149 registers (the qkv GEMV still fits beside). Session 35's probe:
# the fold 5.04 us of attention's 10.37 (the last block copying 52.8 KB ~2.4, merging ~1.25).
# Predicted: the fold ~5.0 -> ~3 us, b1 -1.5 to -3%; b2+ unchanged (not one wave of one
# partition a block). Tests first (a hang would trap, not stall the call), then the bench below
# against main. If kept: `ctest -L cuda`, then re-probe (the s35 probe patch stamps the
# fold's start and end in the last block only; rebase it). (2) g256
# (bench/experiments/2026-12-03-gemv-256-thread-blocks-two-an-sm.patch): GEMV blocks of 256
# threads, two an SM (the same warps; launch bounds keep <= 128 registers: ptxas as main), so
# that the next kernel's blocks land in half an SM as soon as one block leaves it (session 35's
# block starts: qkv and gate_up blocks began ~0.8 us after the previous GEMV's end, down's
# early only where gate_up's blocks had fewer rows). The RMSNorm staging's sums take another
# order (256-thread strides): bits differ from main, the tests' tolerances hold or not.
# Predicted: b1 -1 to -3% or a loss like session 3's one 256-thread block an SM (-25%: half
# the warps; here the warps are the same). Bench b1, 2, 4, 8, two rounds.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend \
#     cuda_test_rope_attention cuda_test_gemv" -o .device/sf.txz sf=<patch>
#   scripts/variant_build.sh -t "loom cuda_test_gemv cuda_test_cuda_backend" -o .device/g2.txz \
#     g256=<patch>
#   cp this file .device/run.sh; carry .device/{base,sf,g2}.txz and .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'sf', 'g2')]"
DST=$OUT; W=/tmp/s36c1; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
for vt in sf:cuda_test_attention sf:cuda_test_rope_attention sf:cuda_test_cuda_backend \
    sf:cuda_test_gemv g256:cuda_test_gemv g256:cuda_test_cuda_backend; do
  v=${vt%:*}; t=${vt#*:}
  timeout 150 .device/$v/bin/$t > "$W/test_${v}_$t.log" 2>&1
  echo "$v $t rc=$? $(grep -E 'assertions' "$W/test_${v}_$t.log" | tr -s ' ')"
done
tar czf "$DST/s36c1.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for n in main sf g256; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 150 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done; tar czf "$DST/s36c1.tgz" -C "$W" .; done
