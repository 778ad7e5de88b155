#!/bin/bash
# Session 57 call 5: one weight segment a warp in flight once staged, at batch 1 (v4: the
# backend's default gemv_inflight 1 at one slot; call 4's sweep on the aligned ring: 1,691 /
# 1,690 against 1,711 / 1,712 us at b1 ctx 600). cuda_test_megakernel with v4, then v3
# (b09272e) and v4 alternated twice, the main table only (b1 ctx 600 and 7,000, b8: v4 changes
# batch 1 alone). Predicted: b1 ctx 600 -19 us, ctx 7,000 unknown, b8 unchanged. Carry
# .device/s57.txz (libraries), .device/v3b.txz and .device/v4.txz. Prepared in session 57 and not
# run (its device time ran out): v4 is b09272e with
# bench/experiments/2026-12-05-session57-inflight-1-at-batch-1.patch; rebuild the packs if lost.
python3 -c "
import tarfile
for p in ('.device/s57.txz', '.device/v3b.txz', '.device/v4.txz'): tarfile.open(p).extractall()"
. scripts/device_env.sh
W=/tmp/s57_5; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 120 build/bin/cuda_test_megakernel_v4 > "$W/test_v4.log" 2>&1
echo "test v4 rc=$?"; tail -2 "$W/test_v4.log"
for r in 1 2; do
  for v in v3 v4; do
    LOOM_BENCH_MEGA_SWEEPS=none timeout 120 build/bin/cuda_bench_$v "$W/${v}_$r.json" --megakernel \
      > "$W/${v}_$r.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -E "^(1|8) +[0-9]+ +(graph|mega)" "$W/${v}_$r.log"
  done
done
tar czf "$OUT/s57_5.tgz" -C "$W" .
