#!/bin/bash
# Prepared in session 47, not run (no device time was left): session 48's first call, ~5
# minutes. Carry .device/s47c.txz (1e466c9's tests pack, the final tree: `scripts/pack_device.sh
# tests build .device/s47c.txz` on 1e466c9 if lost) and .device/tail.tgz (tail/build/bin: cuda_bench and the
# sampling tests built with bench/experiments/2026-12-04-top-p-tail-32bit.patch applied:
# `tar czf` of those four files with libsimdjson, under tail/build/bin).
# 1. ctest -L cuda on 1e466c9, session 47's final tree (its call 10 was refused). It differs from
#    37dc515 (20/20 in call 6) in the hoisted class scan (sampling tests passed, call 9) and in
#    sample_final no longer reading a drawn row's parameters (not GPU-run).
# 2. The sampling check, the 32-bit tail weight against 1e466c9, alternated twice. The patch
#    weighs fp32 top-p's tokens past u = 16 as F >> ((q >> 12) - 9) in 32-bit operations: the
#    count pass's tail branch 24 -> 15 SASS instructions, no inner branch (cuobjdump here).
#    Predicted: fp32 top-p sigma 4 305 -> ~285-295 us at 256 rows (~95% of its tokens take the
#    tail; a warp of mixed tokens runs both branches), sigma 1 and every other case unchanged.
python3 -c "import tarfile; tarfile.open('.device/s47c.txz').extractall()"
python3 -c "import tarfile; tarfile.open('.device/tail.tgz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 220 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest.log")
tail -4 "$OUT/ctest.log"
BUILD=tail/build BASE=build REPEATS=2 scripts/sampling_check.sh
