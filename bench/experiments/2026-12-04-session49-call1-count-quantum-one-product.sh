#!/bin/bash
# Prepared in session 48, not run (its device time was spent): session 49's first call, ~4
# minutes. Session 48 left both packs built (.device/base.tgz at the review commit that follows d835718, .device/new.tgz with
# the patch; git-ignored, so rebuild them if lost, ~1 minute each after a build):
#   base: main's cuda_bench and sampling tests  -> tar czf .device/base.tgz base/build/bin/{...}
#   new:  the same with bench/experiments/2026-12-04-count-quantum-one-product.patch applied
#         -> .device/new.tgz (new/build/bin: cuda_bench, cuda_test_sampling,
#         cuda_test_sampling_noise, libsimdjson.so.14), as session 48's calls 2-7 did.
# The patch: the count pass's quantum as one product by log2(e)'s float times 2^12, a min with
# 163,840 and a sum with 2^23 rounded toward zero (FMUL, FMNMX, FADD.RZ: no FMA with two
# constants, whose register move ptxas repeats every logit), and count_class's increment as
# 1 + (h & 1) * 0xffff (a logit's quantum 8 -> 7 SASS instructions, the class branch 7 -> 6,
# cuobjdump in session 48). Its new CUDA test compares the count-pass quantum with top_p_quantum
# over every difference zmax - z (2^31 floats, and a NaN), which also covers main's version.
# Predicted: fp32 top-p sigma 4 253.5 -> ~247-250 us at 256 rows, sigma 1 235 -> ~232.
python3 -c "import tarfile; [tarfile.open('.device/' + p).extractall() for p in ('base.tgz', 'new.tgz')]"
BUILD=new/build BASE=base/build REPEATS=2 scripts/sampling_check.sh
