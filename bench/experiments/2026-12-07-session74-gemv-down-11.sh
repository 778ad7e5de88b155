#!/bin/bash
# Session 74, its last two calls (H100, ~35 s a round): the one-row GEMV streaming Terra's down
# in two batches of 11 loads a lane instead of three of 8
# (bench/experiments/2026-12-07-gemv-down-two-batches-of-11-not-kept.patch; its header has the
# why, the registers, the prediction and the outcome: slower, not kept). Run as
# `ROUNDS=1 BATCHES=1 bash …` twice on one machine for the device time left; the second call's
# loom bench refused the first's JSON (the machine keeps /tmp), so $D is now emptied first.
# Pack: .device/u11.txz, from scripts/variant_build.sh -t "cuda_bench cuda_test_gemv loom"
#   -o .device/u11.txz main=main u11=bench/experiments/2026-12-07-gemv-down-two-batches-of-11-not-kept.patch
# (it unpacks to .device/main/bin and .device/u11/bin).
# carry: [".device/u11.txz"]
# Order: the patch's cuda_test_gemv (its beside-attention case holds the 11-wide kernel to the
# 8-wide one's bits at k 5632), then cuda_bench's GEMV rates and the chain and loom bench batch
# 1 and 8 over 8 frames, each alternated main / u11 ROUNDS times (default 2; BATCHES default
# 1,8). Everything comes back as $OUT/s75.tgz.
set -u
. scripts/device_env.sh
D=/tmp/s75; rm -rf $D; mkdir -p $D  # a warm machine keeps /tmp: loom bench refuses an existing --json
unpack_pack .device/u11.txz .
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$D/device.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 \
  > "$D/smi.csv" 2>&1 &
smi=$!
timeout 120 .device/u11/bin/cuda_test_gemv > "$D/test_gemv_u11.log" 2>&1
echo "u11 cuda_test_gemv rc=$? at ${SECONDS}s"; grep -E "test cases|assertions" "$D/test_gemv_u11.log"
for r in $(seq "${ROUNDS:-2}"); do
  for v in main u11; do
    timeout 90 .device/$v/bin/cuda_bench "$D/gemv_${v}_$r.json" --only gemv_vs_cublas,gemv_chain \
      > "$D/gemv_${v}_$r.log" 2>&1
    echo "$v r$r rc=$? at ${SECONDS}s"; grep -iE "down|chain" "$D/gemv_${v}_$r.log" | head -4
  done
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for r in $(seq "${ROUNDS:-2}"); do
  for v in main u11; do
    log=$D/bench_${v}_$r
    timeout 120 .device/$v/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
      --batch-sizes "${BATCHES:-1,8}" --json "$log.json" > "$log.log" 2>&1
    echo "$v r$r rc=$? at ${SECONDS}s"; grep -E "^ +[18] " "$log.log"
  done
  tar czf "$OUT/s75.tgz" -C /tmp s75
done
kill $smi 2>/dev/null
tar czf "$OUT/s75.tgz" -C /tmp s75
