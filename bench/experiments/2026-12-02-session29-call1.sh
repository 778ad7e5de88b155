#!/bin/bash
# Session 29's first device call: main's tree as a whole (ctest -L cuda), with the tensor-core
# GEMV in clusters of k_split blocks (5f6893e), against the GEMV before it (old: 85961c0's
# kernels and schedule, /tmp/p/old.patch = git diff 5f6893e 85961c0 -- kernels lib), and the
# fused-GEMV schedule up to 16 slots (s16: kGemvMaxSlots 4 -> 16).
# Build here first (~4 minutes):
#   make -C build -j3 && rm -f build/bin/cuda_test_shared_plan && scripts/pack_device.sh tests build
#   scripts/variant_build.sh -t loom -o .device/vars.txz old=/tmp/p/old.patch s16=/tmp/p/slots16.patch
#   cp bench/experiments/2026-12-02-session29-call1.sh .device/run.sh
# then carry .device/carry.txz, .device/vars.txz and .device/run.sh; `bash .device/run.sh`.
python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('.device/carry.txz', '.device/vars.txz')]"
FINAL=$OUT; OUT=/tmp/s29c1; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
# The 88-GEMV chain with the k_split sweep (every GEMV, and each layer GEMV alone, at 8 rows).
build/bin/cuda_bench "$OUT/chain.json" --only gemv_chain > "$OUT/chain.log" 2>&1
echo "chain rc=$?"; grep -E '^(default|same|tensor|FMA|qkv|o |gate_up|down)' "$OUT/chain.log"
(cd build && timeout 240 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
bench() {  # variant binary, batch sizes, tag
  "$1" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes "$2" \
    --json "$OUT/bench_$3.json" > "$OUT/bench_$3.log" 2>&1
  echo "$3 rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_$3.log" | tr -s ' '
}
for r in 1 2; do
  [ $r = 2 ] && [ $SECONDS -gt 420 ] && { echo "round 2 skipped at ${SECONDS}s"; break; }
  bench .device/old/bin/loom 1,2,3,4,8,16 old_$r
  bench build/bin/loom 1,2,3,4 new_$r
  bench .device/s16/bin/loom 8,16 s16_$r
done
tar czf "$FINAL/s29c1.tgz" -C "$OUT" .
