#!/bin/bash
# Session 61, call 3: cta_wait's spin without the trap check on every poll (every 16th; no sleep
# between the first 15): a poll was two L2 round trips (the counter, then the trap word) plus a
# 32-256 ns sleep, so a wait ended ~1 round trip later than one load a poll would (~1-3 us a
# hop while the weights stream; ~5 hops a layer). Against main 2b79bde (attention_mma), by
# scripts/mega_ab.sh. Predicted: b1 -20..-100 us, b8 likewise.
# Carry .device/s61p.txz (the change, tests) and .device/s61n.txz (main 2b79bde, tests pack).
bash scripts/mega_ab.sh .device/s61p.txz .device/s61n.txz skip_math_b8
