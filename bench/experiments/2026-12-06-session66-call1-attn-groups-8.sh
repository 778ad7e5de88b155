#!/bin/bash
# Prepared in session 65, not run (its device time ran out): branch attn-groups-8 (.device/g8.txz,
# a tests pack) — the attention groups as eight groups of 2 warps with 32-key partitions (each
# group's buffers ~9 KB, eight chains an SM where main runs four of 64 keys) against main's
# four groups (.device/grp.txz, session 65's measured build; main's SASS is identical):
# cuda_test_megakernel, base / change twice, loom bench batch 8. Predicted: b8 ctx 7,000 2,381-
# 2,406 -> ~2,150-2,250 us (more chains in flight), ctx 600 and b1 unchanged. Repack either if
# .device was lost: `git checkout attn-groups-8 && cmake --build build && scripts/pack_device.sh
# tests build .device/g8.txz`, and from main the same as .device/grp.txz.
set -u
bash scripts/mega_ab.sh .device/g8.txz .device/grp.txz none 8
