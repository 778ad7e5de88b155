#!/bin/bash
# Prepared in session 69 (no device left), for session 70: the admission phase of the 256-job
# run at larger prompt chunks. With the default --max-batch-slots 2048 the 256 × 1,746-slot
# prompts enter over ~233 mixed steps (2.70 s of the 103.5 s H200 FP8 256 × 22 run, session 52),
# each also running every sequence already decoding; the sequences then finish ~233 steps apart
# (mean 251.4 sequences a decode step, not 256). At 8192 slots a step they enter in ~55 larger
# steps (GEMMs at m ≈ 8,400 instead of ≈ 2,300; a quarter of the per-step fixed costs), so the
# admission phase and the ragged end both shrink: the run takes ~55 + 12,694 steps instead of
# ~233 + 12,694, ~178 fewer steps of ~1.9 ms fixed cost (the rest of a step; the KV reads are the
# same work either way), and the prompt GEMMs run at m ≈ 8,000. Predicted: +0.3 to +0.5% tokens/s (attention's
# bits do not depend on the chunking; cuBLAS's GEMMs at other row counts may round otherwise, so
# tokens can differ, as with any other batch composition without --batch-invariant).
# loom bench FP8 KV, Terra-size v1, 256 jobs × 22 frames after 3 context frames, default and
# --max-batch-slots 8192 (MBS overrides the list, e.g. "2048 8192 4096"; ~125 s a run on an H200),
# from a tests pack of main (PACK, default .device/m70.txz).
set -u
. scripts/device_env.sh
unpack_pack "${PACK:-.device/m70.txz}" .
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for mbs in ${MBS:-2048 8192}; do
  log=$OUT/b256_fp8_mbs$mbs
  timeout 170 build/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 \
    --context-frames 3 --batch-sizes 1 --num-jobs 256 --max-batch-slots $mbs --json "$log.json" \
    > "$log.log" 2>&1
  echo "mbs $mbs rc=$? at ${SECONDS}s"; grep -E "^ +256 " "$log.log" | tail -1
done
