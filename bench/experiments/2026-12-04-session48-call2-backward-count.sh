#!/bin/bash
# Session 48, call 2 (~3 minutes). Carry .device/tail.tgz (tail/build/bin: 7bb2a94's cuda_bench
# and sampling tests; the tail patch on 1e466c9 is 7bb2a94's kernel code) and .device/back.tgz
# (back/build/bin: the same with the count passes streamed backward, `for_each_logit<true>`).
# Hypothesis: a wave of 132 one-row filter blocks streams 132 MB of fp32 rows (66 MB bf16), more
# than the 50 MB L2, so each forward pass after the first found its row's start evicted; with the
# count pass backward it starts on the tail the zmax pass read last, and the gathering pass
# (forward) on the head the count pass read last. Predicted: fp32 top-p sigma 1 261 -> ~215-235
# us at 256 rows (~30% of passes two and three from L2), sigma 4 288 -> ~265 (its count pass is
# instruction-bound), bf16 top-p 175 -> ~155-165 (two passes, 66 MB a wave); the rest unchanged.
python3 -c "import tarfile; tarfile.open('.device/tail.tgz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/back.tgz').extractall()"
BUILD=back/build BASE=tail/build REPEATS=2 scripts/sampling_check.sh
