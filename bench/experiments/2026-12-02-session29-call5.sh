#!/bin/bash
# Session 29's fifth device call: the final tree (gemv_linear_ops: qkv + o + down at 5-8 slots,
# qkv + o at 9-16) — the backend tests that run forward passes, and loom bench at batch 8 and 16.
# Build here first:
#   make -C build -j3 loom loom_cuda_backend cuda_test_cuda_backend cuda_test_features cuda_test_shared_kv
#   tar -cf - build/bin/{loom,libloom-cuda.so,libsimdjson.so.*,models,cuda_test_cuda_backend,\
#     cuda_test_features,cuda_test_shared_kv} | xz -T1 --lzma2=preset=6,dict=256MiB > .device/final.txz
#   cp bench/experiments/2026-12-02-session29-call5.sh .device/run.sh
# then carry .device/final.txz and .device/run.sh; `bash .device/run.sh`.
python3 -c "import tarfile; tarfile.open('.device/final.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s29c5; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for t in cuda_test_cuda_backend cuda_test_features cuda_test_shared_kv; do
  timeout 60 "build/bin/$t" > "$OUT/$t.log" 2>&1
  echo "$t rc=$? $(grep -E 'assertions' "$OUT/$t.log" | tr -s ' ')"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8,16 \
  --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench.log" | tr -s ' '
tar czf "$FINAL/s29c5.tgz" -C "$OUT" .
