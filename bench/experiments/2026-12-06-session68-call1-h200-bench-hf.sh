#!/bin/bash
# Prepared in session 67 (its H200 starts failed), for session 68: main's kernels at 0681e37
# (.device/m67b.txz: a tests pack of main, `scripts/pack_device.sh tests`) on an H200:
# cuda_test_megakernel, then scripts/mega_check.sh bench with HF=1 (loom bench batch 1 and 8 on
# the graph path and with --megakernel, HF transformers eager at batch 1 and 8 and static-cache
# torch.compile at batch 1, Terra-size v1, 8 frames after 3 context frames): issue 15's table on
# today's main in one call (session 66's H200 figures were of 43867df's kernels).
set -u
# PACK overrides the pack (default .device/m70.txz: a tests pack of 8dbfafb, session 69).
. scripts/device_env.sh
unpack_pack "${PACK:-.device/m70.txz}"
top=$OUT
export OUT=$top/c3
mkdir -p "$OUT"
timeout 120 build/bin/cuda_test_megakernel > "$OUT/test_megakernel.log" 2>&1
echo "test rc=$? at ${SECONDS}s"; tail -n 2 "$OUT/test_megakernel.log"
HF=1 bash scripts/mega_check.sh bench > "$top/bench.txt" 2>&1
echo "bench rc=$? at ${SECONDS}s"
grep -E "^ +(1|8) |eager|compile|s/frame" "$top/bench.txt" | tail -n 20
tar -czf "$top/c3.tgz" -C "$top" c3 && rm -r "$top/c3"
