#!/bin/bash
# Session 51, call 3 (~5 minutes): main with hq (the fp32 top-p count pass's hoisted division,
# kept from call 2) and pk (the draw's Philox keys once a block, measured in call 2 only stacked
# on ft, which was not kept) applied: ctest -L cuda on it, then cuda_bench --only sampling,
# main (session 48's pack, .device/new.tgz) and this tree alternated twice. Carry .device/s51b.txz
# (`scripts/pack_device.sh tests build .device/s51b.txz` with both patches applied) and
# .device/new.tgz. Keep pk if the tests pass and temperature gains with no mode losing.
python3 -c "
import tarfile
tarfile.open('.device/s51b.txz').extractall()
tarfile.open('.device/new.tgz').extractall('b')"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 300 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest.log")
tail -4 "$OUT/ctest.log"
rm -f b/new/build/bin/cuda_test_*
VARIANTS="base=b/new/build hqpk=build" REPEATS=2 scripts/sampling_check.sh
