#!/bin/bash
# Session 71, call 2: the skinny decode GEMM (kernels/gemm_skinny.cu: TMA ring, two wgmma
# warpgroups, k split across CTAs and folded by the last), its first device run. SK (default
# .device/sk1.txz) is a tests pack of the tree with it (now bench/experiments/2026-12-07-gemm-
# skinny-wgmma-not-kept.patch on main); BASE (.device/m73.txz) main before it. Calls 3, 5 and 6
# ran it again with SK=sk3 / sk4 / sk5, REST=0 (no other suites), FRAMES / LAST_START / E2E=0.
# 1. cuda_test_gemm (the kernel against the CPU, splits, guard columns, counters left at zero),
#    then the rest of ctest -L cuda (Gemm routes Terra-like shapes at 65-256 rows to it).
# 2. cuda_bench --only gemm_skinny: each layer GEMM at 64 / 128 / 256 rows, cuBLAS against the
#    kernel at each split count; the 22-layer chain as one graph, routing off / on, twice.
#    Predicted (H100, m 256): qkv ~8.5 -> ~5.5 us, o ~9 -> ~4.5, down ~15 -> ~9; the chain
#    −10-14 us a layer.
# 3. If the tests passed, the 256-row chain gained and time is left: loom bench 256 jobs x 22 frames FP8 (Terra-size v1,
#    3 context frames), base then new.
set -u
. scripts/device_env.sh
unpack_pack "${SK:-.device/sk1.txz}" .
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 60 ctest -R cuda_test_gemm --output-on-failure) > "$OUT/ctest_gemm.log" 2>&1
gemm_rc=$?
echo "cuda_test_gemm rc=$gemm_rc at ${SECONDS}s"; grep -E "assertions|FAIL|ERROR" "$OUT/ctest_gemm.log" | head -20
timeout 120 build/bin/cuda_bench "$OUT/skinny.json" --only gemm_skinny > "$OUT/skinny.log" 2>&1
echo "cuda_bench rc=$? at ${SECONDS}s"; cat "$OUT/skinny.log" | grep -v "^$" | tail -24
[ $gemm_rc -ne 0 ] && exit 0
if [ "${REST:-1}" = 1 ]; then
  (cd build && timeout 150 ctest -L cuda -j3 -E cuda_test_gemm --output-on-failure) > "$OUT/ctest_cuda.log" 2>&1
  echo "ctest rc=$? at ${SECONDS}s"; grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest_cuda.log" | head
fi
[ "${E2E:-1}" = 1 ] || exit 0
# The end-to-end A/B only where the 256-row chain gained.
python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))['gemm_skinny']['chain']
ms = lambda sk, f: min(r['ms'] for r in c if r['m'] == 256 and r['skinny'] == sk and r['cluster'] == f)
sys.exit(0 if ms(True, 0) < ms(False, 0) else 1)" "$OUT/skinny.json" || { echo "chain: no gain"; exit 0; }
unpack_pack "${BASE:-.device/m73.txz}" base
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in base new; do
  bin=build/bin/loom
  [ $v = base ] && bin=base/build/bin/loom
  [ $SECONDS -gt ${LAST_START:-380} ] && break
  log=$OUT/b256_fp8_$v
  timeout 170 $bin bench --model /tmp/terra --kv-dtype fp8 --frames ${FRAMES:-22} --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$log.json" > "$log.log" 2>&1
  echo "$v rc=$? at ${SECONDS}s"; grep -E "^ +256 |steps:|replayed" "$log.log" | tail -3
done
