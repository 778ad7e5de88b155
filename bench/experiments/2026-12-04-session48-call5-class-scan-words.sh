#!/bin/bash
# Session 48, call 5 (~3 minutes). Carry .device/back.tgz (back/build/bin: 380af15's sampling
# kernels, the count passes backward) and .device/scan.tgz (scan/build/bin: the same with the
# fp32 class scan by words, `top_p_class_mass`, and block_scan's warp totals scanned by
# shuffles instead of a 32-step loop a thread).
# The class scan read a thread's 64 classes one at a time with a skewed class index (~25 SASS
# instructions a class, the 64-bit weight); now a word (two classes) a step, a 32-bit F and a
# widening multiply-add a class (~11 a class, cuobjdump of the loop here). Predicted: ~3.6 us
# less a row: fp32 top-p sigma 1 250.6 -> ~244 us at 256 rows, sigma 4 284 -> ~277, one row
# -3 to -4 us; bf16 top-p and the selects (block_scan) unchanged or slightly faster.
python3 -c "import tarfile; [tarfile.open('.device/' + p).extractall() for p in ('back.tgz', 'scan.tgz')]"
BUILD=scan/build BASE=back/build REPEATS=2 scripts/sampling_check.sh
