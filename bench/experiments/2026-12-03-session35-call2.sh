#!/bin/bash
# Session 35, call 2 (~8 minutes). On main (7d7673a + experiment files: call 1's sy kept):
# cuda_test_gemv (the qkv GEMV and the 147-register decode kernel still fit an SM). Variants:
# sz (bench/experiments/2026-12-03-attention-split-seq-by-tile.patch: under fuse_rope the split
# decode kernel takes its sequence as its tile, j0 = 0: the tiles[] load leaves the chain before
# the first K/V tile's issue, kv_len -> block table -> cp.async instead of tiles -> kv_len -> ...;
# predicted b1 -0.2 to -0.8%), gr (...-gemv-rows-interleaved-over-blocks.patch: the one-row GEMV's
# warp w of block b takes rows b + w * blocks + i * all warps, so the last partial window of rows
# (gate_up: 704 of 2,112 warps with a sixth row; qkv: 448 with a second) is spread over all 132
# SMs instead of sitting on the first 44 / 28 blocks; predicted b1 -1 to -3%), szgr (both), and
# sb (...-seq-by-tile-table-ahead.patch: sz + the first tile's block-table entries read beside
# kv_len, before the partition check: the first copies issued one load after the start, not
# two; 147 registers; predicted b1 a further -0.2 to -0.5%).
# Tests under each, then loom bench b1 and b2, three rounds interleaved.
# Build here first: make -C build -j$(nproc) && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz;
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend \
#     cuda_test_rope_attention cuda_test_gemv" -o .device/sx.txz sz=<patch> sb=<patch> gr=<patch> \
#     szgr=<patch>
#   cp this file .device/run.sh; carry .device/{base,sx}.txz and .device/run.sh.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'sx')]"
DST=$OUT; W=/tmp/s35c2; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
timeout 100 build/bin/cuda_test_gemv > "$W/test_main_cuda_test_gemv.log" 2>&1
echo "main cuda_test_gemv rc=$? $(grep -E 'assertions' "$W/test_main_cuda_test_gemv.log" | tr -s ' ')"
for vt in sz:cuda_test_attention sz:cuda_test_rope_attention gr:cuda_test_gemv \
    sb:cuda_test_attention sb:cuda_test_cuda_backend sb:cuda_test_rope_attention \
    szgr:cuda_test_attention szgr:cuda_test_cuda_backend szgr:cuda_test_rope_attention \
    szgr:cuda_test_gemv; do
  v=${vt%:*}; t=${vt#*:}
  timeout 150 .device/$v/bin/$t > "$W/test_${v}_$t.log" 2>&1
  echo "$v $t rc=$? $(grep -E 'assertions' "$W/test_${v}_$t.log" | tr -s ' ')"
done
tar czf "$DST/s35c2.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for n in main sz sb gr szgr; do
  b=build/bin; [ $n != main ] && b=.device/$n/bin
  timeout 100 $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,2 \
    --json "$W/bench_${n}_$r.json" > "$W/bench_${n}_$r.log" 2>&1
  echo "$n r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_${n}_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done; tar czf "$DST/s35c2.tgz" -C "$W" .; done
