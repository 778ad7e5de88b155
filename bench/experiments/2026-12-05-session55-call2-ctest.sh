#!/bin/bash
# Session 55 call 2 (cut to the megakernel, install and cuda backend suites: ~240 s of device
# time were left): ctest on the session's final tree (attn_early reverted; the
# run's signal and identity fixes). Carry `scripts/pack_device.sh tests build .device/s55b.txz`.
python3 -c "import tarfile; tarfile.open('.device/s55b.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 150 ctest -R "megakernel|test_install|cuda_test_cuda_backend" --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest.log")
grep -E "Test +#|tests passed|rc=" "$OUT/ctest.log"
