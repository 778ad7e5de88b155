#!/bin/bash
# Session 29's third device call: main (5c14aed: 85961c0's GEMV kernels, PTX equal, with the
# launch fixes and the schedule chosen on the bucket-padded slot count) as a whole tree —
# ctest -L cuda, the 88-GEMV chain, loom bench at batch 1, 2, 4 and 8 in two rounds.
# Build here first:
#   make -C build -j3 && rm -f build/bin/cuda_test_shared_plan && scripts/pack_device.sh tests build
#   cp bench/experiments/2026-12-02-session29-call3.sh .device/run.sh
# then carry .device/carry.txz and .device/run.sh; `bash .device/run.sh` (~4 minutes).
python3 -c "import tarfile; tarfile.open('.device/carry.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s29c3; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
build/bin/cuda_bench "$OUT/chain.json" --only gemv_chain > "$OUT/chain.log" 2>&1
echo "chain rc=$?"; grep -E '^(default|same|tensor|FMA)' "$OUT/chain.log"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do
  build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2,4,8 \
    --json "$OUT/bench_$r.json" > "$OUT/bench_$r.log" 2>&1
  echo "round $r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_$r.log" | tr -s ' '
done
tar czf "$FINAL/s29c3.tgz" -C "$OUT" .
