#!/bin/bash
# Session 61, call 4: GateUp's tiles write act = silu(g) · u themselves at every batch size (their
# rows gate / up pairs, mega_gate_up_row, as the tensor-core GEMVs' did at 4-8), so Down stages
# act by one cp.async round trip (stage_flat) where batch 1-2 read gate and up chunk by chunk, two
# L2 round trips a thread at Terra (call 2: the late CTA's Down staging 6.3 us, o_proj's one
# round trip 2.3). Against main 8d77694 (the polls), by scripts/mega_ab.sh.
# Predicted: b1 -40..-80 us (~3 us a layer), ctx 7000 the same, b8 unchanged (the tensor-core
# GEMVs did it already).
# Carry .device/s61g.txz (the change, tests) and .device/s61p.txz (main 8d77694, tests pack).
bash scripts/mega_ab.sh .device/s61g.txz .device/s61p.txz skip_math_b8
