#!/bin/bash
# Session 65, call 5: the attention groups with the next partition's k rows staged as soon as
# the group's scores have read k (under its softmax and P·V; v's after P·V as before), branch
# attn-groups-k-early (.device/gke.txz) against main's groups (.device/grp.txz):
# cuda_test_megakernel, base / change twice, loom bench batch 8. Predicted: b8 ctx 7,000
# 2,406 -> ~2,250-2,330 us, ctx 600 and b1 unchanged.
set -u
bash scripts/mega_ab.sh .device/gke.txz .device/grp.txz none
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
