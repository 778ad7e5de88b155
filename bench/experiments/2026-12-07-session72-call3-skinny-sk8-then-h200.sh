#!/bin/bash
# Session 72, call 3: the skinny GEMM's sk8 (the cluster fold eight bands a round trip; the
# weights-alone probe P 3), ~60 s; then, on an H200 only, call 1's part 2 (ctest -L cuda on main
# and the FP8 256 x 22 A/B against 233d877, ~400 s).
# carry: [".device/sk8.txz", ".device/m73.txz", ".device/m71.txz"]
set -u
SK=.device/sk8.txz bash bench/experiments/2026-12-07-session72-call2-skinny-cluster-fold.sh
grep -q H200 "$OUT/device.txt" || { echo "not an H200: part 2 skipped"; exit 0; }
. scripts/device_env.sh
unpack_pack .device/m73.txz .
unpack_pack .device/m71.txz base
(cd build && timeout 150 ctest -L cuda -j3 --output-on-failure) > "$OUT/ctest_cuda.log" 2>&1
echo "ctest rc=$? at ${SECONDS}s"; grep -E "tests passed|Failed" "$OUT/ctest_cuda.log" | head -3
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in base new; do
  bin=build/bin/loom
  [ $v = base ] && bin=base/build/bin/loom
  [ $SECONDS -gt 420 ] && break
  log=$OUT/b256_fp8_$v
  timeout 170 $bin bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$log.json" > "$log.log" 2>&1
  echo "$v rc=$? at ${SECONDS}s"; grep -E "^ +256 |steps:" "$log.log" | tail -2
done
