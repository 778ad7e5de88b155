#!/bin/bash
# Session 61, call 10: the step's per-slot inputs (positions, cache slots, kv_len) and RoPE's
# frequencies copied into shared memory at the kernel's start: a Qkv tile's RoPE and cache
# write, an attention unit's partition count and the fold's read them from global memory inside
# the unit, each an L2 round trip on the chain (~1.2 us while the weights stream). Against main
# (8455ffb's kernel) by scripts/mega_ab.sh.
# Predicted: b1 -15..-40 us, b8 likewise.
# Carry .device/s61c.txz (the change, tests) and .device/s61e.txz (main's kernel, tests pack).
bash scripts/mega_ab.sh .device/s61c.txz .device/s61e.txz none
