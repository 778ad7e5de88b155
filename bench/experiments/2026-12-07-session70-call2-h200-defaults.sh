#!/bin/bash
# Session 70, call 2 (an H200): main at 660f4cd (.device/m72.txz, a tests pack: the prefill
# kernel at 3 blocks an SM and --max-batch-slots 8192 by default) against 233d877 (.device/m71.txz:
# 0 blocks, 2048): ctest -L cuda on 660f4cd, then loom bench 256 jobs x 22 frames FP8 KV
# (Terra-size v1, 3 context frames) with each build's defaults, base first, then new.
# NEW (default .device/m72.txz) names the new build's pack: session 71 passes .device/m73.txz
# (b6f3690 and later: the pool sized after the largest step's activations, not yet GPU-run).
# Predicted from the H100 (calls 1-2): +0.9% from the admission in ~55 steps, a little more from
# the prefill kernel (the mixed steps are ~2% of the run). Then, if the call has time left, the
# new build at --max-batch-slots 16384 (the prompts in ~28 steps; vLLM's offline default).
set -u
. scripts/device_env.sh
unpack_pack "${NEW:-.device/m72.txz}" .
unpack_pack .device/m71.txz base
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda -j3 --output-on-failure) > "$OUT/ctest_cuda.log" 2>&1
echo "ctest rc=$? at ${SECONDS}s"; tail -3 "$OUT/ctest_cuda.log"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in base new new16k; do
  bin=build/bin/loom extra=
  [ $v = base ] && bin=base/build/bin/loom
  [ $v = new16k ] && extra="--max-batch-slots 16384"
  [ $v = new16k ] && [ $SECONDS -gt 330 ] && break
  log=$OUT/b256_fp8_$v
  timeout 170 $bin bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 $extra --json "$log.json" > "$log.log" 2>&1
  echo "$v rc=$? at ${SECONDS}s"; grep -E "^ +256 |steps:" "$log.log" | tail -2
done
