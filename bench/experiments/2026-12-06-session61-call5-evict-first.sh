#!/bin/bash
# Session 61, call 5: the weight ring's bulk copies (and the tensor-core GEMVs' TMA boxes) under an
# L2 evict_first policy. The 3 GB a step pass through the 50 MB L2 once; with the default
# policy they evict what is read again within the step or the next — the norms' weights
# (read before every Qkv / GateUp staging: the late CTA's RMSNorm staging 4.4 / 6.3 us against a
# stage_flat's 2.3), the layer table, instruction lists, RoPE frequencies, positions, the KV
# cache — so those become HBM misses behind ~17 MB of queued weight requests. Against main
# eef3341 by scripts/mega_ab.sh, plus the new build's own A/B (MegakernelDebug::weights_evict
# 1 off / 2 on, alternated twice in one binary) at b1 ctx 600 / 7000 and b8.
# Predicted: b1 -30..-150 us; b8 less.
# Carry .device/s61e.txz (the change, tests) and .device/s61g.txz (main eef3341, tests pack).
bash scripts/mega_ab.sh .device/s61e.txz .device/s61g.txz weights_evict,weights_evict_7000,weights_evict_b8
grep -A5 "evict_first" "$OUT/all.log" | head -40
