#!/bin/bash
# Session 46, call 7 (carry .device/s46d.tgz, b4334be's build, as the base, and .device/s46e.tgz,
# this change): fp32 top-p's gathering pass compares each logit with the draw's and the cut's
# value intervals (two float compares each; the ends found by a 32-way search a warp, 7 rounds,
# instead of one thread's 32-step bisection), and the device's top-p quantum converts u · 4096
# by an FFMA.RZ against 2^23 instead of F2I (cuda_test_sampling_noise checks every u in
# [0, 40)). ncu after call 5 (call 6): 300 us at ncu's clocks, the gathering pass ~28% of the
# stalls at ~16 instructions a logit, the count pass ~26%. Predicted: fp32 top-p 0.9 alone 295
# -> ~260-270 us (sigma 1), the other modes unchanged.
exec bash bench/experiments/2026-12-04-session46-sampling-ab.sh 7 .device/s46d.tgz .device/s46e.tgz
