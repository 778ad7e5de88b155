#!/bin/bash
# Session 58, call 3 (prepared, not run: the session's device time ran out): where a batch-8
# megakernel step goes now that its dot products are cheap (call 2: skip_math 0 / 1 / 2 / 3 at
# b8 2,800 / 2,717 / 2,659 / 2,468 us against ~1,277 with neither math nor waits at b1). The
# per-op trace at batch 8 (and 4), with and without math and
# waits, and batch 8's attention at longer partitions / fewer splits (sweeps attn_min_keys_b8,
# attn_splits_b8: a knob that helps there is a default per batch bucket). Binaries:
# .device/s58t.txz (f04cc34's tests pack) with .device/v8.txz over it (cuda_bench with
# LOOM_BENCH_MEGA_TRACE and the b8 sweeps; cuda_test_megakernel whose graph comparisons take
# LOOM_TEST_MEGA_TIMEOUT_S). Carry both. Then compute-sanitizer memcheck over the tensor-core
# GEMVs (bf16 at 4 and 8 sequences on long_spec: the tiny checkpoints keep the dot loop).
python3 -c "
import tarfile
for p in ('.device/s58t.txz', '.device/v8.txz'):
    tarfile.open(p).extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
LOOM_BENCH_MEGA_SWEEPS=attn_min_keys_b8,attn_splits_b8 \
  LOOM_BENCH_MEGA_TRACE="8,600,0;8,600,3;8,600,2;4,600,0;1,600,3" \
  timeout 300 build/bin/cuda_bench "$OUT/trace.json" --megakernel > "$OUT/trace.log" 2>&1
echo "rc=$?"; grep -E "^(1|8) +[0-9]+ +(graph|mega)|^megakernel batch|^  [a-z]|^ +[0-9]+: graph|\(batch" "$OUT/trace.log"
LOOM_TEST_MEGA_TIMEOUT_S=600 timeout 240 /usr/local/cuda/bin/compute-sanitizer --tool memcheck \
  --error-exitcode 1 build/bin/cuda_test_megakernel -tc="bf16 megakernel near the graph path*" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -5 "$OUT/memcheck.log"
