#!/bin/bash
# Prepared in session 74, for a later session with ~550 s of device time on either GPU: does the
# 16,384-slot step budget (+0.12-0.14% for FP8 256 x 22 on an H100, session 74,
# bench/results/2026-12-07-h100-s74-max-batch-slots-16k-abab.json) also hold where the KV pool
# is short? bf16 256 x 22 needs ~84 GB of KV and preempts on both GPUs; 16,384 slots take 0.8% of
# the pool for the larger step's activations. Runs bf16 256 x 22 at 8,192 and at 16,384 slots on
# main (.device/m73.txz: b6f3690's build, main's GPU code), then 8,192 again while the call has
# time (LAST_START, default 330 s). Change the default only if 16,384 is not slower here; the
# preemptions and recomputed slots of each run are in its JSON.
# carry: [".device/m73.txz"]
set -u
. scripts/device_env.sh
D=/tmp/bf16k; rm -rf $D; mkdir -p $D
sample_gpu $D
unpack_pack .device/m73.txz .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in s8k s16k s8k2; do
  extra=
  [ $v = s16k ] && extra="--max-batch-slots 16384"
  [ $v = s8k2 ] && [ $SECONDS -ge "${LAST_START:-330}" ] && continue
  log=$D/b256_bf16_$v
  echo "$v starts at ${SECONDS}s" >> "$D/marks.txt"
  timeout 290 build/bin/loom bench --model /tmp/terra --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 $extra --json "$log.json" > "$log.log" 2>&1
  echo "$v rc=$? at ${SECONDS}s" | tee -a "$D/marks.txt"
  grep -E "^ +256 |steps:" "$log.log" | tail -2
  tar czf "$OUT/bf16k.tgz" -C /tmp bf16k
done
kill $smi 2>/dev/null
tar czf "$OUT/bf16k.tgz" -C /tmp bf16k
