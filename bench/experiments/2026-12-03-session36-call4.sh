#!/bin/bash
# Session 36, call 4 (~1.5 minutes; 278 s of device time left). pf
# (bench/experiments/2026-12-03-gemv-pair-flags-no-copies-ahead.patch): call 3's pa0 (the pair
# kernel, release before the first gate/up batch, nothing copied ahead: b1 +5.0% against main)
# with the meeting by a flag a block (st.release of the launch's epoch; warp 0 polls all flags
# with ld.acquire) instead of 132 atomics on one word, which serialise at its L2 slice (~2 us at
# ~15 ns each). Predicted: pf within +-1% of main if the atomics were the meeting's cost.
# Build: scripts/variant_build.sh -t "loom cuda_test_gemv" -o .device/pf.txz pf=<patch>;
#   carry .device/{base,pf}.txz and .device/run.sh (base as packed for call 3).
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'pf')]"
DST=$OUT; W=/tmp/s36c4; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
timeout 60 .device/pf/bin/cuda_test_gemv > "$W/test_pf_cuda_test_gemv.log" 2>&1
echo "pf cuda_test_gemv rc=$? $(grep -E 'assertions' "$W/test_pf_cuda_test_gemv.log" | tr -s ' ')"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for n in main pf; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 60 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done; tar czf "$DST/s36c4.tgz" -C "$W" .; done
