#!/bin/bash
# Session 39, call 5 (~3 minutes; the session's last ~280 device seconds). bk
# (bench/experiments/2026-12-03-fold-bulk-copy.patch) a second round: call 4 measured it once,
# b4 / b8 / b16 0.8440 / 0.8992 / 1.1033 -> 0.8398 / 0.8946 / 1.1007 s/frame. Then ctest -L cuda
# on bk's whole tree (call 4 ran its four attention tests only).
# Build: main's tests pack (.device/tests.txz) and bk's (git apply the patch, make, 
#   scripts/pack_device.sh tests build .device/tests_bk.txz, git apply -R).
python3 -c "import tarfile; tarfile.open('.device/tests.txz').extractall()"
mv build/bin .device/mainbin && rm -rf build
python3 -c "import tarfile; tarfile.open('.device/tests_bk.txz').extractall()"
DST=$OUT; W=/tmp/s39c5; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name bin
  timeout 100 $2/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 4,8,16 --json "$W/bench_$1.json" > "$W/bench_$1.log" 2>&1
  echo "$1 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
run main .device/mainbin; tar czf "$DST/s39c5.tgz" -C "$W" .
run bk build/bin; tar czf "$DST/s39c5.tgz" -C "$W" .
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest_bk.log" 2>&1; echo "ctest bk rc=$?"; grep -E "tests passed|tests failed" "$W/ctest_bk.log")
tar czf "$DST/s39c5.tgz" -C "$W" .
