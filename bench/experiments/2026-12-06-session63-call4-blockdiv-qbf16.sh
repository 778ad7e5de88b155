#!/bin/bash
# Session 63, call 4: branch attn-walk2 (.device/s63w5.txz: q in bf16 for the mma; a key's
# block by FastDiv, four keys' block-table entries a round in the 4-8 slot staging) against main 5b7a0aa (.device/s63base.txz)
# by scripts/mega_ab.sh, with the 128-key walk alternated off / on at batch 8, ctx 600 / 3,000 /
# 7,000 in the branch's binary; logs and JSON under $OUT (at most 8 files come back).
bash scripts/mega_ab.sh .device/s63w5.txz .device/s63base.txz attn_walk_b8,attn_walk_b8_3000,attn_walk_b8_7000
grep -A5 "walks in 128" "$OUT/all.log" | head -48
