#!/bin/bash
# Session 48, call 6 (~3 minutes). Carry .device/scan.tgz (scan/build/bin: dc78993's sampling
# binaries) and .device/ftab.tgz (ftab/build/bin: the same with fp32 top-p's tail weight from a
# 4,096-entry table of F by q & 4095 in shared memory, after the class counts).
# A token past the classes (u >= 16; ~95% of a sigma-4 row's) paid two table loads, a 64-bit
# product and a funnel shift for its F; now one load (the count pass's tail branch 14 -> 10 SASS
# instructions, cuobjdump here). Predicted: fp32 top-p sigma 4 270 -> ~258-262 us at 256 rows,
# T 0.9 sigma 4 288 -> ~278; sigma 1 and the rest unchanged.
python3 -c "import tarfile; [tarfile.open('.device/' + p).extractall() for p in ('scan.tgz', 'ftab.tgz')]"
BUILD=ftab/build BASE=scan/build REPEATS=2 scripts/sampling_check.sh
