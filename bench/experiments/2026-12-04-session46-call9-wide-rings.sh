#!/bin/bash
# Session 46, call 9 (carry .device/s46e.tgz, 939e800's build, as the base, and .device/s46g.tgz,
# this change): wider rings where a pass leaves BinSmem free: the zmax pass 8 slots over the
# whole area before sm.ring (7 x 16 KB in flight an SM, not 3), fp32 top-p's count pass 5 past
# its 128 KB of counts, its gathering pass 8 past its 64 KB of candidates. Reading of call 6's
# ncu: the passes are streams at one 1,024-thread block an SM with 48 KB in flight, i.e. bound
# by latency (Little's law: ~1.5-2 us at ~32 GB/s an SM), not by their instructions any more.
# Predicted: fp32 top-p 0.9 alone 292 -> ~250-265 us (sigma 1); bf16 top-p (its zmax-free path)
# unchanged; top-k + top-p rows through the zmax pass a little faster.
exec bash bench/experiments/2026-12-04-session46-sampling-ab.sh 9 .device/s46e.tgz .device/s46g.tgz
