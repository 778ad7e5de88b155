#!/bin/bash
# Session 29's fourth device call: the GEMM path's layer GEMMs through the tensor-core GEMV at
# 5-16 slots, op by op (kGemvLinearOps: ops3 = qkv + o, ops7 = + gate_up, ops11 = qkv + o + down,
# ops15 = all four), against main (HEAD, no op), loom bench at batch 8 and 16 in two rounds; the
# backend tests that run forward passes, for each variant.
# Build here first (patches: kGemvLinearOps set to 3, 7, 11, 15):
#   make -C build -j3 && scripts/pack_device.sh run build .device/base.txz
#   scripts/variant_build.sh -t "loom cuda_test_cuda_backend cuda_test_features cuda_test_shared_kv \
#     cuda_test_batch_invariance" -o .device/vars.txz ops3=/tmp/p/ops3.patch ops7=/tmp/p/ops7.patch \
#     ops11=/tmp/p/ops11.patch ops15=/tmp/p/ops15.patch
#   cp bench/experiments/2026-12-02-session29-call4.sh .device/run.sh
# then carry .device/base.txz, .device/vars.txz and .device/run.sh; `bash .device/run.sh`.
python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('.device/base.txz', '.device/vars.txz')]"
FINAL=$OUT; OUT=/tmp/s29c4; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
bench() {  # binary, batch sizes, tag
  "$1" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes "$2" \
    --json "$OUT/bench_$3.json" > "$OUT/bench_$3.log" 2>&1
  echo "$3 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_$3.log" | tr -s ' '
}
for r in 1 2; do
  bench build/bin/loom 8,16 main_$r
  for v in ops3 ops7 ops11 ops15; do bench ".device/$v/bin/loom" 8,16 "${v}_$r"; done
  [ $SECONDS -gt 260 ] && { echo "round 2 skipped at ${SECONDS}s"; break; }
done
for v in ops15 ops3; do for t in cuda_test_cuda_backend cuda_test_features cuda_test_shared_kv; do
  timeout 60 ".device/$v/bin/$t" > "$OUT/${v}_$t.log" 2>&1
  echo "$v $t rc=$? $(grep -E 'assertions' "$OUT/${v}_$t.log" | tr -s ' ')"
done; done
tar czf "$FINAL/s29c4.tgz" -C "$OUT" .
