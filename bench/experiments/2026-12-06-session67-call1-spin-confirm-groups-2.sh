#!/bin/bash
# Prepared in session 66 (its device time ran out), for session 67's first call: five builds of
# the megakernel, each a tests pack in .device/ (repack from the branch if lost:
# `git checkout BRANCH && cmake --build build && scripts/pack_device.sh tests build .device/X.txz`)
#   m66  main (its kernels are 43867df's);
#   rp   branch relaxed-polls: no acquire at all — the bound (session 66: batch 1 −2.1% on an
#        H200, −1.0% on an H100);
#   sc   branch spin-confirm: the first poll an acquire load as on main; a spin that fails it
#        polls relaxed and, once the counter is reached, confirms with one acquire load (an
#        extra L2 round trip on the waits that spun, no L1 invalidation a poll; 120 CCTL in the
#        SASS, main 170);
#   g2   branch attn-groups-2: the attention groups as two groups of 8 warps with 128-key
#        partitions (four of 4 with 64 keys on main, eight of 2 with 32 lost 4.2% at batch 8
#        ctx 7,000 in session 66);
#   af   branch attn-proxy-fence: every thread runs fence.proxy.async.shared::cta at the end of an
#        AttnPartial unit (and of its AttnReduce) before the barrier after which the weight
#        ring's bulk copies may land over attention's buffers (batch 4-8: CUTLASS's writer-side
#        form; main fences only in the issuing lane). Kept if within the spread.
# scripts/mega_abn.sh: cuda_bench --megakernel of the five alternated twice, the tests of sc,
# g2 and af, then loom bench --megakernel at batch 1 and 8 of m66, sc, g2 and af. Predicted: sc
# between main and rp at batch 1 (or behind main if the confirming round trip costs more than
# the invalidations); g2 at batch 8 ctx 7,000 within ±3% of main. Keep sc or g2 only if `loom
# bench` gains beyond ~0.5%.
set -u
bash scripts/mega_abn.sh "m66 rp sc g2 af" "sc g2 af" "m66 sc g2 af"
