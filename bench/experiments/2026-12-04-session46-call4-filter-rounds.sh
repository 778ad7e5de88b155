#!/bin/bash
# Session 46, call 4 (carry .device/s46b.txz, main's e13c00f run pack, and .device/s46c.tgz, the
# change's cuda_bench, cuda_test_sampling and CUDA module): for_each_logit's rounds told apart by
# the round (plain 16-byte copies at a running address, no id checks or vote where the round's
# chunks are all whole). ncu (call 3) counted ~49 instructions a round of the ring (4 fp32 logits
# a thread) in each of fp32 top-p's three passes, ~1/3 of the filter's 202 M; the change's hot
# round is ~42 instructions where it was ~64 (zmax pass, SASS). Predicted: fp32 top-p 0.9 alone
# 347 -> ~300 us at 256 rows, bf16 top-p and top-k a few % faster, the draw-only modes unchanged.
# cuda_test_sampling first (the host sampler's tokens, every mode), then `--only sampling` for
# base and change alternated twice.
exec bash bench/experiments/2026-12-04-session46-sampling-ab.sh 4 .device/s46b.txz .device/s46c.tgz
