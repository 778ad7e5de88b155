#!/bin/bash
# Session 65, call 3: AttnPartial at 4-8 slots (bf16, tensor-core GEMVs) as four independent
# groups of 4 warps, each folding its own chain of 64-key partitions online into one partial
# slot (kernels/mega/attention_groups.cuh; branch attn-groups, .device/grp.txz, a tests pack)
# against main e394cbc (.device/m64.txz): cuda_test_megakernel, base / change alternated twice
# (steps table), then loom bench at batch 8 (Terra-size v1, 8 frames after 3 context frames),
# base first. Call 1 (TMA boxes) and session 64 left a 256-key partition at ~7.5 us whatever
# its staging or instruction count: a latency chain, which four chains side by side overlap.
# Predicted: b8 ctx 7,000 2,663 -> ~2,000-2,200 us, ctx 600 -2..-5%, b1 unchanged (same SASS
# but for the shared AttnReduce's argument).
set -u
bash scripts/mega_ab.sh .device/grp.txz .device/m64.txz none
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
