#!/bin/bash
# Session 67, call 2: main with the writer-side proxy fences and the shared K/V stager / score tile
# (.device/m67b.txz, a tests pack of 0681e37): ctest -L cuda; compute-sanitizer memcheck and
# synccheck on the megakernel's bf16 comparisons (the 4-8 slot paths the two changes touch); then
# loom bench at batch 1 and 8 on the graph path and with --megakernel (Terra-size v1 made on the
# fly, 8 frames after 3 context frames), for the README's tables and issue 15's figures.
set -u
python3 -c "import tarfile; tarfile.open('.device/m67b.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 240 ctest -L cuda --output-on-failure) > "$OUT/ctest_cuda.log" 2>&1
echo "ctest rc=$? at ${SECONDS}s"; tail -4 "$OUT/ctest_cuda.log"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck synccheck; do
  LOOM_TEST_MEGA_TIMEOUT_S=120 timeout 120 "$cs" --tool $tool --kernel-name kns=megakernel \
    --error-exitcode 3 build/bin/cuda_test_megakernel \
    -tc="bf16 megakernel near the graph path*" > "$OUT/sanitize_$tool.txt" 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; tail -2 "$OUT/sanitize_$tool.txt"
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
mkdir -p "$OUT/bench"
for mode in graph mega graph mega; do
  [ $SECONDS -gt 420 ] && break
  flag=; [ $mode = mega ] && flag=--megakernel
  log=$OUT/bench/${mode}_$SECONDS
  timeout 90 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,8 $flag --json "$log.json" > "$log.log" 2>&1
  echo "$mode rc=$? at ${SECONDS}s"; tail -n 2 "$log.log"
done
