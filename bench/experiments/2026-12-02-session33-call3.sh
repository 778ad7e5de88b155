#!/bin/bash
# Session 33's third device call (~7 minutes). (1) `ctest -L cuda` on main with the TMA kernel's
# staged warp fold (e0f452f) and the split kernel's fold without its last barrier (91612b0, not
# GPU-run before), then loom bench b1-8 for the README. (2) The batch-1 qkv and o GEMVs built
# for <= 88 registers (bench/experiments/2026-12-02-gemv-beside-attention-env.patch,
# LOOM_BESIDE=1: plus the maximum shared carveout for them and the decode attention; 2: lean
# only; 0: main) so that a decode-attention block (149 registers x 128 threads) fits beside a
# GEMV block: attention's blocks become resident while qkv streams and issue their K/V tiles
# then, instead of landing as the qkv blocks leave (call 1's timeline: 1.4 us PDL release, 1.55
# us between the first and last block's wait, 6.5 us for a partition after it); o's blocks
# land beside attention's and stream their rows before its end. Predicted: b1 -2 to -5%.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_cuda_backend cuda_test_gemv" \
#     -o .device/bs.txz bs=bench/experiments/2026-12-02-gemv-beside-attention-env.patch
#   cp this file .device/run.sh; carry .device/base.txz, .device/bs.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall(); tarfile.open('.device/bs.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s33c3; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
B=.device/bs/bin
for t in cuda_test_cuda_backend cuda_test_gemv; do
  LOOM_BESIDE=1 timeout 150 $B/$t > "$OUT/test_bs_$t.log" 2>&1
  echo "bs $t rc=$? $(grep -E 'assertions' "$OUT/test_bs_$t.log" | tr -s ' ')"
done
tar czf "$FINAL/s33c3.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in 0 1 2; do
  LOOM_BESIDE=$v $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$OUT/bench_bs${v}_$r.json" > "$OUT/bench_bs${v}_$r.log" 2>&1
  echo "beside $v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_bs${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s33c3.tgz" -C "$OUT" .
for v in 0 1; do
  LOOM_BESIDE=$v timeout 100 $B/cuda_bench "$OUT/step_bs$v.json" --step-case 1 600,2000,6000 > "$OUT/step_bs$v.log" 2>&1
  echo "step case b1 beside $v rc=$?"; grep -iE "step|attention" "$OUT/step_bs$v.log" | head -6
done
tar czf "$FINAL/s33c3.tgz" -C "$OUT" .
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8 \
  --json "$OUT/bench_main.json" > "$OUT/bench_main.log" 2>&1
echo "main bench rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_main.log" | tr -s ' '
tar czf "$FINAL/s33c3.tgz" -C "$OUT" .
