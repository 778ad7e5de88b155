#!/bin/bash
# Session 61, call 9: attention's buffers beside the ring at 1-2 slots (attn_apart, the default
# since session 55: 1,794 against 1,822 off then) against over it (the ring one slot deeper, the
# stream stopping at an AttnPartial with work), alternated twice in one binary at b1 and b2, ctx
# 600 and 7,000, on main (8455ffb's kernel): call 7 and 8 measured off ahead at b1 ctx 600 since
# evict_first (1,563 / 1,576; 1,538-1,546 / 1,553-1,571).
# Predicted: off ahead by ~1% at ctx 600; ctx 7,000 unknown.
# Carry .device/s61s.txz (main + the sweeps, run pack).
python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" .device/s61s.txz
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
LOOM_BENCH_MEGA_SWEEPS=attn_apart_ab,attn_apart_7000,attn_apart_b2,attn_apart_b2_7000 LOOM_BENCH_MEGA_TRACE="1,600,0" \
  timeout 200 build/bin/cuda_bench "$OUT/apart.json" --megakernel > "$OUT/apart.log" 2>&1
echo "rc=$?"; grep -E "\(batch|: graph|^(1|8) " "$OUT/apart.log"
