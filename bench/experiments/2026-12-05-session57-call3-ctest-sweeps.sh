#!/bin/bash
# Session 57 call 3: ctest -L cuda on b43a19c (the dot loop's LDS.128 and bf16 unpack), then the
# whole cuda_bench --megakernel on it: every knob's sweep again now that the dot products cost
# ~30 us instead of ~170-440 (their optimum may have moved: rows_per_tile, gemv_early /
# gemv_inflight, attn_splits, attn_min_keys), and the four traces. Carry .device/s57t.txz.
python3 -c "import tarfile; tarfile.open('.device/s57t.txz').extractall()"
. scripts/device_env.sh
W=/tmp/s57_3; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 300 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?")
grep -E "tests passed|Failed|\*\*\*" "$W/ctest.log" | tail -8
timeout 240 build/bin/cuda_bench "$W/full.json" --megakernel > "$W/full.log" 2>&1
echo "bench rc=$?"; grep -vE "^\s*$" "$W/full.log" | grep -v "^wrote" | tail -90
tar czf "$OUT/s57_3.tgz" -C "$W" .
