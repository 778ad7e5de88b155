#!/bin/bash
# Session 60, call 17: FastDiv::set's divisors 1-4 from a table (branch fastdiv-table) against
# main 93e8bbf, by scripts/mega_ab.sh (test first, alternated twice, skip_math at b8).
# Predicted: b1 and b8 -5..-20 us (ncu call 16: the division 1.7% of b1's instructions).
# Carry .device/s60q.txz (fastdiv-table, tests) and .device/s60r.txz (main's kernel).
bash scripts/mega_ab.sh .device/s60q.txz .device/s60r.txz skip_math_b8
