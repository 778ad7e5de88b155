#!/bin/bash
# Session 36, call 2 (~7 minutes). Two variants. pair (bench/experiments/2026-12-03-gemv-pair-o-gate-up.patch):
# at batch 1 the o GEMV and the gate/up GEMV as one kernel (kernels/gemv_pair.cu), one 512-thread
# block an SM. Each block, as soon as it lands (while attention's fold finishes), copies the last
# 3 of its warps' gate/up rows (192 KB an SM, 25 MB of gate/up's 46) into shared memory by bulk
# copies, runs o, issues its first global gate/up batch, meets the other blocks at a counter
# (red.release / ld.acquire, trap after 2 s), stages RMSNorm(residual) through L2 and streams
# the rest (21 MB), the copied rows last. Same bits as the two GEMVs (cuda_test_gemv checks it
# bitwise). Session 35's probe: gate_up 0.80 (release) + 14.40 us a layer at 3.2 TB/s; the fold
# (5.04 us) and o's body (1.98) leave HBM mostly idle. Predicted: gate_up's phase ~15.2 -> ~8 us
# a layer, b1 -8 to -15% (0.68 -> ~0.60 s/frame); b2 unchanged (m = 2 keeps two GEMVs).
# pair0 (...-gemv-pair-o-gate-up-no-copies-ahead.patch): the same kernel with no rows copied
# ahead (pre_rows 0): what the fusion alone gives. Predicted: b1 -1 to -2%.
# Tests first (a meeting that never completes traps), then loom bench b1/b2, three rounds.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom cuda_test_gemv cuda_test_cuda_backend" -o .device/pair.txz \
#     pair=<patch>
#   scripts/variant_build.sh -t loom -o .device/pair0.txz pair0=<patch>
#   cp this file .device/run.sh; carry .device/{base,pair,pair0}.txz and .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'pair', 'pair0')]"
DST=$OUT; W=/tmp/s36c2; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
for t in cuda_test_gemv cuda_test_cuda_backend; do
  timeout 150 .device/pair/bin/$t > "$W/test_pair_$t.log" 2>&1
  echo "pair $t rc=$? $(grep -E 'assertions' "$W/test_pair_$t.log" | tr -s ' ')"
done
tar czf "$DST/s36c2.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for n in main pair pair0; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 100 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done; tar czf "$DST/s36c2.tgz" -C "$W" .; done
