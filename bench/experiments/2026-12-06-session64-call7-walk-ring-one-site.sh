#!/bin/bash
# Session 64, call 7: branch walk-ring2 (.device/w3.txz, a tests pack): call 6's ring walk
# with one staging site (call 6's had two: +1.2k SASS instructions in the batch-8 kernel, and
# its build ran 2.3% slower than main with the walk off), partition p + S staged with p (before
# the wait for a unit's first pair), cp.async groups waited one behind. Against main a34acb9
# (.device/m64.txz): cuda_test_megakernel, base / change alternated twice (steps table; the
# change's attn_walk_ring off / on at batch 8, ctx 3,000 and 7,000), then loom bench at batch 8
# (Terra-size v1, 8 frames after 3 context frames), base first this time. Predicted: b8 ctx
# 7,000 -4%, ctx 600 and b1 unchanged.
set -u
bash scripts/mega_ab.sh .device/w3.txz .device/m64.txz attn_walk_ring_3000,attn_walk_ring_7000 8
