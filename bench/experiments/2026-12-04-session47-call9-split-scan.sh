#!/bin/bash
# Session 47, call 9: fp32 top-p's class scan with the coarse entry and shift hoisted (a
# thread's 64 classes share both) and no branch a class. Carry .device/s47b.txz (37dc515's tests
# pack: the base) and .device/split.tgz (new/build: cuda_bench and the sampling tests with the
# change). The sampling check, new against base, alternated twice. Predicted from call 8's
# timeline (split 12.8 us of a row's ~115, two waves): fp32 top-p 0.9 at 256 rows -4 to -8 us,
# every other case unchanged.
python3 -c "import tarfile; tarfile.open('.device/s47b.txz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/split.tgz').extractall()"
BUILD=new/build BASE=build REPEATS=2 scripts/sampling_check.sh
