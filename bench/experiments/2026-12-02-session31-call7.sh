#!/bin/bash
# Session 31's seventh device call (~4 minutes): the RMSNorm and act_mul kernels by programmatic
# dependent launch where layer ops run through the GEMV (5-16 slots),
# bench/experiments/2026-12-02-norm-act-mul-pdl-small-batch.patch, LOOM_NORM_PDL=1 (0: main's
# launches; the kernels' griddepcontrol instructions are no-ops then). At batch 8 the two norms
# and silu·mul of a layer (0.17 ms a step, ~2.6 µs a kernel) sit between our GEMVs: with PDL
# the qkv and down GEMVs after them stream their first weights while they run, and the norms
# launch under the GEMVs before them. Predicted: ~1-2 µs a boundary, batch 8 -3 to -6%,
# batch 16 (qkv and o only through the GEMV) -1 to -3%. Session 20 measured PDL on these
# kernels only at 256 rows (cuBLAS on both sides): no change. `ctest -L cuda` runs with it on.
# Build here first: git apply the patch, make -C build -j3, rm -f build/bin/cuda_test_shared_plan,
#   scripts/pack_device.sh tests build .device/np.txz, git apply -R the patch;
#   cp bench/experiments/2026-12-02-session31-call7.sh .device/run.sh
# carry .device/np.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/np.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c7; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && LOOM_NORM_PDL=1 timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest (LOOM_NORM_PDL=1) rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in 0 1; do
  LOOM_NORM_PDL=$v build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8,16 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "norm pdl $v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s31c7.tgz" -C "$OUT" .
