#!/bin/bash
# Session 48, call 3 (~4 minutes). Carry .device/tail.tgz (7bb2a94's sampling binaries),
# .device/back.tgz (call 2's: the count passes backward) and .device/pref.tgz (pref/build/bin:
# backward, and `prefetch_row_head` after each count pass: the row's first 256 KB into L2 by
# bulk prefetches while the block scans its classes).
# Call 2 measured far less reuse from the backward count than predicted (fp32 sigma 1 257.5 ->
# 250.6 us at 256 rows, not ~225): L2 kept little of the pass before. Hypothesis: HBM idles
# while a block scans its classes (~13 us of a row's ~115, fp32); bytes prefetched then are
# L2 hits for the gathering pass. Predicted: fp32 top-p sigma 1 250 -> ~235-240 us, sigma 4
# 284 -> ~270; bf16 top-p 175 -> ~165; the rest unchanged.
python3 -c "import tarfile; [tarfile.open('.device/' + p).extractall() for p in ('tail.tgz', 'back.tgz', 'pref.tgz')]"
root=$OUT
OUT=$root/vs-back BUILD=pref/build BASE=back/build REPEATS=2 scripts/sampling_check.sh
OUT=$root/vs-main BUILD=pref/build BASE=tail/build REPEATS=1 scripts/sampling_check.sh
