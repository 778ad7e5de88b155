#!/bin/bash
# Session 52, call 1 (~5 minutes; session 51's call 3 on a newer main): main with pk (the draw's
# Philox keys once a block, measured in session 51's call 2 only stacked on ft, which was not
# kept) applied: ctest -L cuda on it (also the first on a tree with hq, kept in 28f95f9), then
# cuda_bench --only sampling, main (session 48's pack, .device/new.tgz) and this tree alternated
# twice. Carry .device/s52.txz (`scripts/pack_device.sh tests build .device/s52.txz` with
# bench/experiments/2026-12-04-draw-philox-keys-once.patch applied) and .device/new.tgz. Keep pk
# if the tests pass and temperature gains with no mode losing.
python3 -c "
import tarfile
tarfile.open('.device/s52.txz').extractall()
tarfile.open('.device/new.tgz').extractall('b')"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 300 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest.log")
tail -4 "$OUT/ctest.log"
rm -f b/new/build/bin/cuda_test_*
VARIANTS="base=b/new/build pk=build" REPEATS=2 scripts/sampling_check.sh
