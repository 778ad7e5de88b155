#!/bin/bash
# Session 61, call 6: the graph path's GEMV weight loads (gemv.cu, gemv_mma.cu: load_stream) under
# an L2 evict_first policy, as call 5 did for the megakernel's copies (-3..-5% there). Against
# main 8455ffb by scripts/mega_ab.sh (its steps table has the graph replay beside the
# megakernel: b1 ctx 600 / 7000, b8 ctx 600), no sweeps. The megakernel rows: unchanged code.
# Predicted: graph b1 -5..-30 us, b8 (tensor-core GEMV) likewise.
# Carry .device/s61ge.txz (the change, tests) and .device/s61e.txz (main 8455ffb, tests pack).
bash scripts/mega_ab.sh .device/s61ge.txz .device/s61e.txz none
grep -E "^(1|8) .*graph|round" "$OUT/all.log"
