#!/bin/bash
# Prepared in session 49, not run (no device machine was lent after its first call): session 50's
# first call, ~6 minutes. Three stacked patches on main (683635f), main / hq / ft / pk alternated
# twice (scripts/sampling_check.sh's VARIANTS), the tests of hq, ft and pk first:
#   hq: bench/experiments/2026-12-04-top-p-hoisted-division.patch: the fp32 top-p count pass
#       (1) divides rows whose t has no exact reciprocal by the IEEE division's fast path with
#       the reciprocal hoisted (QuotientOf: 3 FMAs a logit for MUFU.RCP, FCHK, 5 FMAs and a
#       branch) where hoisted_quotient_fits says no quantum can change, else the row takes the
#       selects; (2) keeps the quantum in its biased bits (no subtraction a logit); (3) counts
#       the tail's tokens in bit 40 of their weight sum (no increment a tail token). New CUDA
#       tests: QuotientOf against x / t for every |x| in [2^-100, 2^100] for 58 t, and the count
#       quantum of every float below 35 rows' xmax; two new rows in the filter test that the
#       hoisted division does not take (zmax = 0; logits times 2^100).
#       Predicted: T 0.9 sigma 1 254 -> ~240 us, sigma 4 271 -> ~255; T 1 sigma 4 251 -> ~247.
#   ft: hq + bench/experiments/2026-12-04-for-each-logit-fast-trips.patch: for_each_logit streams
#       the whole rounds four a trip, unrolled (slot addresses constant, the copy's address a
#       running pointer, no test a round): the count pass's per-round overhead ~35 -> ~6 SASS
#       instructions (~8 -> ~1.5 a logit; cuobjdump). Every pass takes it (xmax, count, gather,
#       the selects); filter spills 44 -> 148 bytes (f32) and 200 (bf16), none in a per-logit
#       loop (cuobjdump: the spill instructions sit in the selects' digit loops).
#       Predicted: fp32 top-p sigma 4 -10 to -20 us, sigma 1 -3 to -8; bf16 modes -2 to -5%.
#   pk: ft + bench/experiments/2026-12-04-draw-philox-keys-once.patch: the temperature draw's
#       Philox round keys computed once a block (philox_seed_keys) and hidden from ptxas by an
#       empty asm, so that it stops re-adding them in every round of every group (~18 VIADD a
#       Philox call under the loop's register pressure): ptxas puts them in uniform registers as
#       LOP3 operands; the draw loop 1,181 -> ~1,116 static instructions, 58 -> 52 (f32) / 48
#       (bf16) registers (cuobjdump, ptxas -v). The same numbers (one Philox implementation,
#       the keyed one; a CPU test compares the keyed and unkeyed groups). Predicted: temperature
#       171 -> ~155 us (f32), 194 -> ~175 (bf16) at 256 rows; the other modes unchanged.
# Packs (git-ignored, built in session 49 from the tree with the patches applied; rebuild with
# `cmake --build build` and copy cuda_bench, cuda_test_sampling, cuda_test_sampling_noise and
# libsimdjson.so.14 into X/build/bin, then tar czf .device/X.tgz X): .device/new.tgz (main's
# code: session 48's pack, new/build/bin, differs from 683635f in a comment), .device/hq.tgz
# (hq/build/bin), .device/ft.tgz (ft/build/bin), .device/pk.tgz (pk/build/bin).
python3 -c "
import tarfile
for p, d in (('hq', '.'), ('ft', '.'), ('pk', '.'), ('new', 'b')): tarfile.open('.device/' + p + '.tgz').extractall(d)"
rm -f b/new/build/bin/cuda_test_*  # (main's tests ran in session 49's call 1)
VARIANTS="base=b/new/build hq=hq/build ft=ft/build pk=pk/build" REPEATS=2 scripts/sampling_check.sh
