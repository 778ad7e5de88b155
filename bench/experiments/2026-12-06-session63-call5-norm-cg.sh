#!/bin/bash
# Session 63, call 5: branch attn-walk2 at the RMSNorm weights' .cg loads, the walk removed
# (.device/s63w6.txz) against the branch before them (.device/s63w5.txz: the walk's code, off)
# by scripts/mega_ab.sh (b1 and b8 at ctx 600 and 7,000, alternated twice); then the branch's
# `ctest -L cuda` and compute-sanitizer memcheck and synccheck on the megakernel's bf16
# comparisons (scripts/mega_check.sh's commands, without initcheck). At most 8 files come back:
# the logs are gathered into one tarball.
bash scripts/mega_ab.sh .device/s63w6.txz .device/s63w5.txz none
(cd build && timeout 200 ctest -L cuda --output-on-failure) > "$OUT/ctest_cuda.log" 2>&1
echo "ctest rc=$?"; tail -6 "$OUT/ctest_cuda.log"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck synccheck; do
  LOOM_TEST_MEGA_TIMEOUT_S=120 timeout 150 "$cs" --tool $tool --kernel-name kns=megakernel \
    --error-exitcode 3 build/bin/cuda_test_megakernel \
    -tc="bf16 megakernel stays*,bf16 megakernel near the graph path*" > /tmp/san_$tool.log 2>&1
  echo "$tool rc=$?"; tail -3 /tmp/san_$tool.log
done
cp /tmp/san_*.log "$OUT/" 2>/dev/null
tar -czf "$OUT/logs.tgz" -C "$OUT" test.log ctest_cuda.log san_memcheck.log san_synccheck.log &&
  rm -f "$OUT/test.log" "$OUT/ctest_cuda.log" "$OUT"/san_*.log
ls "$OUT"
