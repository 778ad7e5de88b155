#!/bin/bash
# Session 31's last device call (~3 minutes): `ctest -L cuda` on main at 99e5229 (norms and
# act_mul by PDL at 5-8 slots, no knob), then loom bench at batch 8 and 16.
# Build here first: make -C build -j3 && rm -f build/bin/cuda_test_shared_plan &&
#   scripts/pack_device.sh tests build .device/base.txz; cp this file .device/run.sh
# carry .device/base.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/base.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s31c8; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 150 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s31c8.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8,16 \
  --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench.log" | tr -s ' '
tar czf "$FINAL/s31c8.tgz" -C "$OUT" .
