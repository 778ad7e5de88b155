#!/bin/bash
# Session 28's first device call, prepared in session 27 (bench/NOTES-cuda.md, "Ready for
# session 28"): the batch-1 GEMV with its weights through a per-warp shared-memory ring of
# cp.async copies (3 stages x 4 KB a warp, 192 KB an SM in flight, 55-64 registers;
# bench/experiments/2026-12-02-gemv-cp-async-ring-not-kept.patch) against main's register kernel.
# Build here first (~3 minutes):
#   scripts/variant_build.sh -t "cuda_bench cuda_test_gemv loom" -o .device/ring.txz \
#     gmain=main ring=bench/experiments/2026-12-02-gemv-cp-async-ring-not-kept.patch \
#     slots8=bench/experiments/2026-12-02-gemv-up-to-8-slots-not-kept.patch
#   cp bench/experiments/2026-12-02-session28-call1.sh .device/run.sh
# then carry .device/ring.txz and .device/run.sh and run `bash .device/run.sh` (~5 minutes).
# Keep the ring only if cuda_test_gemv passes (its ring-vs-register bits included) and loom bench
# batch 1 is faster than main in both rounds; then ctest -L cuda before committing. slots8: the
# fused GEMV schedule up to 8 slots (kGemvMaxSlots 4 -> 8; chosen in November with an older
# GEMV, cuBLAS above it): keep it only if batch 5-8 are faster (issue 15's batch-8 target).
python3 -c "import tarfile; tarfile.open('.device/ring.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s28c1; mkdir -p "$OUT"
w=$(find / -name 'libcublas.so.13' -path '*nvidia*' 2>/dev/null | head -1)
[ -n "$w" ] && export LD_LIBRARY_PATH="$(dirname "$w"):${LD_LIBRARY_PATH:-}"
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
.device/ring/bin/cuda_test_gemv > "$OUT/ring_test_gemv.log" 2>&1
echo "ring cuda_test_gemv rc=$? $(grep assertions "$OUT/ring_test_gemv.log")"
# The chain: the ring build prints its ring rows and its register rows from one binary.
for r in 1 2; do for v in gmain ring; do
  ".device/$v/bin/cuda_bench" "$OUT/chain_${v}_$r.json" --only gemv_chain > "$OUT/chain_${v}_$r.log" 2>&1
  echo "== $v r$r rc=$?"; grep -E '^default|^same|^register' "$OUT/chain_${v}_$r.log"
done; done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in gmain ring; do
  ".device/$v/bin/loom" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2 \
    --json "$OUT/bench_${v}_$r.json" > "$OUT/bench_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +(1|2) ' "$OUT/bench_${v}_$r.log" | tr -s ' '
done; done
# Batch 8 and 6 (the fused GEMV schedule up to 8 slots against cuBLAS), and main's batch-8 profile.
for r in 1 2; do for v in gmain slots8; do
  ".device/$v/bin/loom" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 6,8 \
    --json "$OUT/bench8_${v}_$r.json" > "$OUT/bench8_${v}_$r.log" 2>&1
  echo "$v r$r rc=$?"; grep -E '^ +(6|8) ' "$OUT/bench8_${v}_$r.log" | tr -s ' '
done; done
.device/gmain/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8 \
  --profile --json "$OUT/bench8_profile.json" > "$OUT/bench8_profile.log" 2>&1
echo "b8 profile rc=$?"; tail -22 "$OUT/bench8_profile.log"
# Batch-1 attention (11.5 us a layer in session 27): main's decode step at batch 1 with each
# kernel family left out and the attention launch variants (block caps, PDL).
.device/gmain/bin/cuda_bench "$OUT/step_b1.json" --step-case 1 600,2000 > "$OUT/step_b1.log" 2>&1
echo "step case rc=$?"; grep -E "graph without" "$OUT/step_b1.log"
tar czf "$FINAL/s28c1.tgz" -C "$OUT" .
