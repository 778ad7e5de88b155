#!/bin/bash
# Session 61, call 8: at 1-2 slots an AttnPartial's first partition is prefetched when the
# instruction before it (its CTA's Qkv tile) has ended, no longer before that instruction runs:
# the prefetch's kv_len and block-table loads (dependent round trips, every thread) sat before
# the Qkv's wait and staging, on the chain (the late Qkv CTA's start-to-staged 4.6 us against
# o_proj's 2.3). Against main 8455ffb by scripts/mega_ab.sh, with the attn_apart sweep (1 off:
# no prefetch; 2 on) in both.
# Predicted: b1 -20..-50 us; attn_apart on ahead of off again (call 7: off 1,563, on 1,576).
# Carry .device/s61q.txz (the change, tests) and .device/s61e.txz (main 8455ffb, tests pack).
bash scripts/mega_ab.sh .device/s61q.txz .device/s61e.txz attn_apart
grep -A3 "attention beside" "$OUT/all.log"
