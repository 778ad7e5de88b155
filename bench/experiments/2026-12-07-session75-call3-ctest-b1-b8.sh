#!/bin/bash
# Session 75, call 3: main 4ca4703's GPU code (batch 1's GEMV norm_w and the RmsNorm kernel's
# weight before their PDL waits) under `ctest -L cuda`, then loom bench batch 1 and 8 (Terra-size
# v1, 8 frames, 3 context frames). carry: [".device/m75.txz"] (scripts/pack_device.sh tests build
# .device/m75.txz). Everything comes back as $OUT/c3.tgz.
set -u
. scripts/device_env.sh
D=/tmp/c3; rm -rf $D; mkdir -p $D
unpack_pack .device/m75.txz .
sample_gpu $D
(cd build && timeout 200 ctest -L cuda -j3 --output-on-failure) > "$D/ctest_cuda.log" 2>&1
echo "ctest rc=$? at ${SECONDS}s"; grep -E "tests passed|Failed|\*\*\*" "$D/ctest_cuda.log" | head -5
tar czf "$OUT/c3.tgz" -C /tmp c3
[ -d /tmp/terra ] || python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
timeout 100 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1,8 --json "$D/bench_b1_b8.json" > "$D/bench_b1_b8.log" 2>&1
echo "bench rc=$? at ${SECONDS}s"; grep -E "^ +[18] " "$D/bench_b1_b8.log"
kill $smi 2>/dev/null
tar czf "$OUT/c3.tgz" -C /tmp c3
