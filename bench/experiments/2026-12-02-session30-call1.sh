#!/bin/bash
# Session 30's first device call, prepared in session 29 (bench/NOTES-cuda.md, "Ready for
# session 30"): the fused GEMV schedule (norms and SiLU in the GEMVs' staging, the residual added
# by o and down) at 5-8 slots (f8) or 5-16 (f16) with gate_up alone on cuBLAS behind its own
# RMSNorm kernel, against main (qkv, o, down or qkv, o through the GEMV inside the GEMM path).
# The down GEMV follows cuBLAS's gate_up under PDL there (its weights stream early, its wait is
# for the whole GEMM): the variants' forward-pass tests say whether that holds.
# Build here first (~2 minutes):
#   make -C build -j3 && rm -f build/bin/cuda_test_shared_plan && scripts/pack_device.sh tests build \
#     .device/base.txz   (the tests pack: main's ctest -L cuda runs first; lm_head_gemv is not
#     yet GPU-run)
#   scripts/variant_build.sh -t "loom cuda_test_cuda_backend cuda_test_features cuda_test_shared_kv" \
#     -o .device/vars.txz f8=bench/experiments/2026-12-02-gemv-fused-but-gate-up-slots8.patch \
#     f16=bench/experiments/2026-12-02-gemv-fused-but-gate-up-slots16.patch
#   cp bench/experiments/2026-12-02-session30-call1.sh .device/run.sh
# then carry .device/base.txz, .device/vars.txz and .device/run.sh; `bash .device/run.sh`
# (~8 minutes). Keep a variant only if its tests pass and it is faster at 8 (f8) or 8 and 16
# (f16) in both rounds.
python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('.device/base.txz', '.device/vars.txz')]"
FINAL=$OUT; OUT=/tmp/s30c1; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
for v in f8 f16; do for t in cuda_test_cuda_backend cuda_test_features cuda_test_shared_kv; do
  timeout 60 ".device/$v/bin/$t" > "$OUT/${v}_$t.log" 2>&1
  echo "$v $t rc=$? $(grep -E 'assertions' "$OUT/${v}_$t.log" | tr -s ' ')"
done; done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
bench() {  # binary, batch sizes, tag
  "$1" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes "$2" \
    --json "$OUT/bench_$3.json" > "$OUT/bench_$3.log" 2>&1
  echo "$3 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_$3.log" | tr -s ' '
}
for r in 1 2; do
  bench build/bin/loom 6,8,16 main_$r
  bench .device/f8/bin/loom 6,8 f8_$r
  bench .device/f16/bin/loom 16 f16_$r
done
tar czf "$FINAL/s30c1.tgz" -C "$OUT" .
