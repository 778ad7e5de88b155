#!/bin/bash
# Session 60, call 2 (branch mma-copies-exp, not for main): is batch 8's slow streaming the
# tensor-core segments' 8-15 small bulk copies? weight_stream (call 1): 8 rows x 512 B in 16
# copies streams at 64.9-78.8% of copy, in 8 copies at 97.4%. MegaArgs::mma_copies 0 (main: 15
# rotated copies), 1 (8 unrotated copies: ldmatrix 8-way bank conflicts, same bits), 2 (one
# 4 KB copy of the wrong bytes, timing with skip_math 3 only), at batch 8 and 4, with and
# without math and waits, each twice. Predicted: skip_math 3 at b8 1,994 -> ~1,400 us with 2
# if the copies' count is the cause (b1's no-math step is 1,239-1,295).
# Also the b1 gemv_ahead sweep again (call 1: off 1,730 against on 1,795).
python3 -c "import tarfile; tarfile.open('.device/s60m.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
LOOM_BENCH_MEGA_SWEEPS=mma_copies,gemv_ahead timeout 400 build/bin/cuda_bench \
  "$OUT/sweep.json" --megakernel > "$OUT/sweep.log" 2>&1
echo "rc=$?"; grep -E "mma_copies|next GEMVs|^ +[12]:|mega|graph " "$OUT/sweep.log" | head -60
