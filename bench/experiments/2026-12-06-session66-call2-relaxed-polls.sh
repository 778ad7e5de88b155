#!/bin/bash
# Session 66, call 2: branch relaxed-polls (.device/rp.txz, a tests pack) against main 43867df
# (.device/m66.txz). Every ld.acquire.gpu / atom.acq_rel.gpu compiles to a CCTL.IVALL that
# empties the SM's L1 (170 in the megakernel's SASS): after each wait the instruction list, the
# layer table, the sampling parameters and the other read-only tables come from the L2 again,
# a round trip under the weight stream each (~1 µs). The branch polls with ld.relaxed.gpu and
# makes the completing add release-only (10 CCTL left): not a design to keep (the issue asks
# for acquire loads), but the upper bound of what the invalidation costs. Predicted: b1 ctx 600
# 1,503 -> 1,440-1,480 µs if the post-wait loads sit on the chain, ±0.5% if they overlap the
# waits. Then `loom bench --megakernel` at batch 1 and 8 for both.
set -u
bash scripts/mega_ab.sh .device/rp.txz .device/m66.txz none 1,8
