#!/bin/bash
# Session 27's first device call, prepared in session 26 (bench/NOTES-cuda.md, "Ready for
# session 27"): the two group-case candidates, the GEMV chain's timeline and the lm_head bulk
# kernel, each against main in one call (~5 minutes). Build here first (~3 minutes):
#   scripts/variant_build.sh -t "cuda_bench cuda_test_attention_shared" -o .device/attn.txz \
#     main=main nomask=bench/experiments/2026-12-02-swapped-tile-whole-no-mask-not-kept.patch \
#     probe=bench/experiments/2026-12-02-probe-group-tiles-never-refilled.patch
#   scripts/variant_build.sh -t "cuda_bench cuda_test_gemv loom" -o .device/gemv.txz \
#     gmain=main lmhead=bench/experiments/2026-12-02-gemv-bulk-lm-head-only-not-kept.patch \
#     timeline=bench/experiments/2026-12-02-probe-gemv-chain-timeline.patch
#   cp bench/experiments/2026-12-02-session27-call1.sh .device/run.sh
# then carry .device/attn.txz, .device/gemv.txz and .device/run.sh (~42 MB with the tree's 18)
# and run `bash .device/run.sh`.
python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('.device/attn.txz', '.device/gemv.txz')]"
# Every log and JSON goes into one archive, $OUT/call1.tgz (the device tool returns 8 files).
FINAL=$OUT
OUT=/tmp/call1
mkdir -p "$OUT"
w=$(find / -name 'libcublas.so.13' -path '*nvidia*' 2>/dev/null | head -1)
[ -n "$w" ] && export LD_LIBRARY_PATH="$(dirname "$w"):${LD_LIBRARY_PATH:-}"
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
# 1. The candidates' tests: the no-mask tile bitwise against the prefill kernel; the bulk
# kernel's op cases and PDL chain.
.device/nomask/bin/cuda_test_attention_shared > "$OUT/test_attention_shared_nomask.log" 2>&1
echo "nomask cuda_test_attention_shared rc=$? $(grep assertions "$OUT/test_attention_shared_nomask.log")"
.device/lmhead/bin/cuda_test_gemv > "$OUT/test_gemv_lmhead.log" 2>&1
echo "lmhead cuda_test_gemv rc=$? $(grep assertions "$OUT/test_gemv_lmhead.log")"
# 2. The group case (b256, groups of 8 sharing 1,746 keys): main / no mask / probe, alternated.
for r in 1 2; do for ctx in 1746 3000; do for v in main nomask probe; do
  ".device/$v/bin/cuda_bench" /tmp/sc.json --shared-case 256 $ctx 8 1746 > /tmp/sc.log 2>&1
  (echo "== $v ctx $ctx run $r"; cat /tmp/sc.log) >> "$OUT/shared_case.log"
  echo "$v ctx $ctx r$r group $(grep -E 'shared    group' /tmp/sc.log | awk '{print $(NF-1), $NF}')"
done; done; done
# 3. The 88-GEMV chain: the register kernel's per-block timeline; the chain with the lm_head
# bulk kernel (its default row against its register-only row).
.device/timeline/bin/cuda_bench "$OUT/chain_timeline.json" --only gemv_chain > "$OUT/chain_timeline.log" 2>&1
echo "timeline rc=$?"; grep -A6 "^timeline" "$OUT/chain_timeline.log"
.device/lmhead/bin/cuda_bench "$OUT/chain_lmhead.json" --only gemv_chain > "$OUT/chain_lmhead.log" 2>&1
echo "lmhead chain rc=$?"; grep -E "^default|^register kernel only|^bulk" "$OUT/chain_lmhead.log"
# 4. Batch 1 end to end (8 frames, 3 context frames): main / lm_head bulk, alternated.
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2; do for v in gmain lmhead; do
  ".device/$v/bin/loom" bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --json "/tmp/b1_${v}_$r.json" > /tmp/b1.log 2>&1
  echo "$v r$r rc=$? $(grep -E '^ +1 ' /tmp/b1.log | tr -s ' ')"
  (echo "== $v run $r"; cat /tmp/b1.log) >> "$OUT/bench_b1.log"
done; done
cp /tmp/b1_gmain_1.json "$OUT/bench_b1_main.json"; cp /tmp/b1_lmhead_1.json "$OUT/bench_b1_lmhead.json"
tar czf "$FINAL/call1.tgz" -C "$OUT" .
