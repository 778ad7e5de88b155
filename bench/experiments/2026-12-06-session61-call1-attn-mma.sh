#!/bin/bash
# Session 61, call 1: AttnPartial's scores and P·V on the tensor cores at 4-8 slots in bf16
# (kernels/mega/attention_mma.cuh) against main 24dd2be, by scripts/mega_ab.sh (the change's
# cuda_test_megakernel first, then base and change alternated twice, skip_math at b8). The base
# rounds also re-measure main after the review that took the trace-only stamps out (not measured
# in session 60).
# Predicted: b8 ctx 600 1,867 -> ~1,760-1,800 (attention's compute ~8.5 -> ~4 us a layer along
# the chain); b1 unchanged (its SASS is main's but for the static shared memory's size).
# Carry .device/s61n.txz (the change, tests) and .device/s61base.txz (main).
bash scripts/mega_ab.sh .device/s61n.txz .device/s61base.txz skip_math_b8
