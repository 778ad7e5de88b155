#!/bin/bash
# Session 64, call 5: branch attn-pair f261867 (.device/p1.txz, a tests pack) against main
# a34acb9 (.device/m64.txz): at 4-8 slots in bf16 a walking unit takes its partitions two at a
# time (the second's K/V staged into the ring, where the weight stream stopped), both chains of
# the register partition side by side in each warp (attn_mma_partition's NP = 2, calls at every
# slot count). The change's cuda_test_megakernel, then base / change alternated twice (steps
# table; the change's attn_walk_ring off / on at batch 8, ctx 3,000 and 7,000: off is f1's
# register partition one at a time). Predicted: b8 ctx 7,000 2,660 -> ~2,200 us (4 rounds of
# partitions a layer instead of 7).
set -u
bash scripts/mega_ab.sh .device/p1.txz .device/m64.txz attn_walk_ring_3000,attn_walk_ring_7000
python3 - "$OUT" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/*_[12].json")):
    d = json.load(open(f))
    print(f.split("/")[-1], {k: [round(r["graph_gpu_s"] * 1e6, 1) for r in v]
                             for k, v in d.items() if k.startswith("attn_walk")})
PY
