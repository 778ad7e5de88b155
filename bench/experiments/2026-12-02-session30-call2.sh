#!/bin/bash
# Session 30's second device call, prepared in session 29: the batch-1 decode attention with the
# slot's row, position and cache slot read before griddepcontrol.wait and the new key's and
# value's elements loaded while the tile's copies are in flight
# (bench/experiments/2026-12-02-attention-decode-inputs-before-wait.patch; the same arithmetic,
# ptxas 151 -> 153 registers, no spills) against main: its attention tests (bitwise suites
# included), cuda_bench --step-case 1 600,2000, and loom bench at batch 1 in two rounds.
# Predicted (helper's reading of attention_mma.cu, session 29): two dependent round trips fewer
# after the wait on every layer's critical block, ~0.5-1 µs a layer, ~1-3% of a batch-1 step.
# Build here first (~2 minutes):
#   make -C build -j3 && scripts/pack_device.sh run build .device/base.txz
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_attention cuda_test_rope_attention \
#     cuda_test_cuda_backend cuda_test_batch_invariance" -o .device/attn.txz \
#     attn=bench/experiments/2026-12-02-attention-decode-inputs-before-wait.patch \
#     attn2=bench/experiments/2026-12-02-attention-decode-one-acq-rel-atomic.patch
# (attn2, session 30: attn plus the partitions' count by one atom.acq_rel.gpu of thread 0 after
# the block's barrier, instead of every thread's __threadfence, the atomic and a second fence.)
#   cp bench/experiments/2026-12-02-session30-call2.sh .device/run.sh
# then carry .device/base.txz, .device/attn.txz and .device/run.sh; `bash .device/run.sh`
# (~5 minutes). Keep it only if the tests pass and batch 1 is faster in both rounds.
[ -d build/bin ] || python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/attn.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s30c2; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for v in attn attn2; do for t in cuda_test_attention cuda_test_rope_attention cuda_test_cuda_backend cuda_test_batch_invariance; do
  timeout 90 ".device/$v/bin/$t" > "$OUT/${v}_$t.log" 2>&1
  echo "$v $t rc=$? $(grep -E 'assertions' "$OUT/${v}_$t.log" | tr -s ' ')"
done; done
for v in main attn attn2; do
  b=build/bin; [ $v != main ] && b=.device/$v/bin
  "$b/cuda_bench" "$OUT/step_$v.json" --step-case 1 600,2000 > "$OUT/step_$v.log" 2>&1
  echo "$v step case rc=$?"; grep -E "without (nothing|attention|all but attention)" "$OUT/step_$v.log"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in main attn attn2; do
  b=build/bin; [ $v != main ] && b=.device/$v/bin
  "$b/loom" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
tar czf "$FINAL/s30c2.tgz" -C "$OUT" .
