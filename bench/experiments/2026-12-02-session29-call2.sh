#!/bin/bash
# Session 29's second device call: the k_split GEMV with P = 8 / k_split warp slices a block
# (ffee159), ctest -L cuda on it, the chain's k_split sweep, and loom bench against old (85961c0's
# GEMV and schedule) — at 1-4 sequences with the default k_split, at 8 and 16 with the fused
# schedule up to 16 slots and k_split by the default rule (s16), 2 everywhere (s16k2) or 8
# (s16k8) below n 32768.
# Build here first (~3 minutes; patches: git diff HEAD 85961c0 -- kernels lib, kGemvMaxSlots 16,
# and gemv_mma_k_split returning 2 or 8):
#   make -C build -j3 && rm -f build/bin/cuda_test_shared_plan && scripts/pack_device.sh tests build
#   scripts/variant_build.sh -t loom -o .device/vars.txz old=/tmp/p/old.patch \
#     s16=/tmp/p/slots16.patch s16k2=/tmp/p/s16k2.patch s16k8=/tmp/p/s16k8.patch
#   cp bench/experiments/2026-12-02-session29-call2.sh .device/run.sh
# then carry .device/carry.txz, .device/vars.txz and .device/run.sh; `bash .device/run.sh`.
python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('.device/carry.txz', '.device/vars.txz')]"
FINAL=$OUT; OUT=/tmp/s29c2; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
build/bin/cuda_test_gemv > "$OUT/test_gemv.log" 2>&1
echo "cuda_test_gemv rc=$? $(grep -E 'assertions|test cases' "$OUT/test_gemv.log" | tr -s ' ' | tr '\n' ' ')"
build/bin/cuda_bench "$OUT/chain.json" --only gemv_chain > "$OUT/chain.log" 2>&1
echo "chain rc=$?"; grep -E '^(default|same|tensor|FMA|qkv|o |gate_up|down)' "$OUT/chain.log"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
bench() {  # variant binary, batch sizes, tag
  "$1" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes "$2" \
    --json "$OUT/bench_$3.json" > "$OUT/bench_$3.log" 2>&1
  echo "$3 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_$3.log" | tr -s ' '
}
bench .device/old/bin/loom 1,2,4,8,16 old
bench build/bin/loom 2,4 new
bench .device/s16/bin/loom 8,16 s16
bench .device/s16k2/bin/loom 2,8,16 s16k2
bench .device/s16k8/bin/loom 2,8,16 s16k8
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s29c2.tgz" -C "$OUT" .
