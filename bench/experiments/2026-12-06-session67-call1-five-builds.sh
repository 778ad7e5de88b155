#!/bin/bash
# Session 67, call 1 (session 66's prepared call, rebuilt: this session's checkout had none of its
# branches or packs). Five builds of the megakernel, each a tests pack in .device/ (made with
# `scripts/pack_device.sh tests` from the branch):
#   m67  main (7bf4122: its kernels are 43867df's);
#   rp   branch relaxed-polls (bench/experiments/2026-12-06-relaxed-polls-bound-not-kept.patch):
#        no acquire at all, the bound (session 66: batch 1 −2.1% on an H200, −1.0% on an H100);
#   sc   branch spin-confirm: the first poll an acquire load as on main; a wait that spins polls
#        relaxed and confirms with one acquire load once the counter is seen at its target (one
#        more L2 round trip on the waits that spun, no L1 invalidation a poll; 120 CCTL, main 170);
#   af   branch attn-proxy-fence: every thread fences the async proxy before AttnPartial's and
#        AttnReduce's publishes where attention's buffers overlap the ring (batch 4-8; kernels/
#        tma.cuh's rule: the writing threads fence; main fences in the issuing lane only);
#   dd   branch stage-dedupe: the review's two duplications as one helper each (stage_kv_async for
#        the 4-8 slot partition and the groups; attn_score_tile for the two score loops): SASS not
#        identical (batch 4-8 kernels ±40-56 instructions, 128 registers, 0 spills).
# Predicted: sc between main and rp at batch 1; af and dd within the spread of main. Kept: sc if
# `loom bench` gains beyond ~0.5%; af and dd if within the spread.
set -u
bash scripts/mega_abn.sh "m67 rp sc af dd" "sc af dd" "m67 sc af dd"
