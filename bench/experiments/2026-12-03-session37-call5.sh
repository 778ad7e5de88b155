#!/bin/bash
# Session 37, call 5 (~3 minutes). `ctest -L cuda` on main with the 3-warp TMA blocks (the kept
# form of call 4's w3, without its env switch, with a test at b8 over ~5,000 keys), and loom
# bench b8 once.
python3 -c "import tarfile; tarfile.open('.device/keep.txz').extractall()"
DST=$OUT; W=/tmp/s37c5; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?"; grep -E "tests passed|tests failed" "$W/ctest.log")
tar czf "$DST/s37c5.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
timeout 60 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8 \
  --json "$W/bench_b8.json" > "$W/bench_b8.log" 2>&1
echo "bench rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_b8.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
tar czf "$DST/s37c5.tgz" -C "$W" .
