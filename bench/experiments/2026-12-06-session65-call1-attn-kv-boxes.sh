#!/bin/bash
# Session 65, call 1: AttnPartial's k and v at 4-8 slots as boxes of one tensor map over the KV
# pool (2 x 8 TMA copies a 256-key partition at block size 64, issued by warp 0, on an mbarrier;
# rows in 64-column planes with the 128-byte swizzle) instead of 4,096 16-byte cp.async pieces
# with their block-table address arithmetic (.device/kvt.txz, a tests pack of this tree), against
# main e394cbc (.device/m64.txz): cuda_test_megakernel (with the new block sizes 64, 8, 24, 12
# at 4-8 slots in bf16), base / change alternated twice (steps table), then loom bench at batch 8
# (Terra-size v1, 8 frames after 3 context frames), base first. Session 60's weight segments
# went 15 copies -> 1 box for -19% at batch 8; a partition's staging was 3.3k of its ~14k warp
# instructions and its cp.async share the MIO pipe with the products' shared loads.
# Predicted: b8 ctx 7,000 2,663 -> ~2,300-2,450 us, ctx 600 -1..-3%, b1 unchanged.
set -u
bash scripts/mega_ab.sh .device/kvt.txz .device/m64.txz none
tar -czf "$OUT/ab_json.tgz" -C "$OUT" base_1.json base_2.json new_1.json new_2.json &&
  rm "$OUT"/base_?.json "$OUT"/new_?.json
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in base new; do
  bin=build/bin/loom
  [ $v = base ] && bin=base/build/bin/loom
  timeout 150 $bin bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8 \
    --megakernel --json "$OUT/bench_$v.json" > "$OUT/bench_$v.log" 2>&1
  echo "$v rc=$?"; tail -2 "$OUT/bench_$v.log"
done
