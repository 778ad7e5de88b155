#!/bin/bash
# Session 61, call 13 (branch attn-mma-b1): AttnPartial's scores and P·V on the tensor cores at
# batch 1 too (its k rows swizzled c ^ (key mod 8): ldmatrix conflict-free; v's c ^ 2 (key mod
# 4): 2-way on .trans), bf16; not at 2 slots (ptxas spilled 44 bytes). Against main b817b11 by
# scripts/mega_ab.sh. Predicted: b1 -10..-30 us (a 64-key partition's ~1.5 us of CUDA-core
# products a layer), ctx 7,000 more (256-key partitions), b8 unchanged.
# Carry .device/s61b.txz (the change, tests) and .device/s61m.txz (main b817b11, tests pack).
bash scripts/mega_ab.sh .device/s61b.txz .device/s61m.txz none
