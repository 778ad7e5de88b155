#!/bin/bash
# Prepared in session 57 for session 58's first call (not run: the device time ran out).
# Three batch-1 changes on b09272e (main at the end of session 57), each against main, alternated
# twice on one machine (the main table only: b1 ctx 600 and 7,000, b8), each after its
# cuda_test_megakernel:
#   v4 = main + bench/experiments/2026-12-05-session57-inflight-1-at-batch-1.patch: one weight
#        segment a warp in flight once staged, at batch 1 (call 4's sweep on the aligned ring:
#        1,691 / 1,690 against 1,711 / 1,712 us at b1 ctx 600). Predicted -19 us at ctx 600.
#   v5 = main + bench/experiments/2026-12-05-session57-attention-qk-lds128.patch: AttnPartial's
#        q·k loop reads k and q by 16-byte loads (the compiler had split k's chunk into four
#        32-bit loads and q's 8 floats into 8, as in the GEMV dot loop; same bits, 0 spills).
#        Predicted: a few us a step (the busy splits are on every layer's attention chain).
#   v6 = main + bench/experiments/2026-12-05-session57-wait-backoff-64ns.patch: the waits'
#        __nanosleep back-off capped at 64 ns instead of 256 (a wait ends up to the cap after
#        its counter; ~5-6 waits on a layer's chain). Predicted -10 to -20 us at batch 1.
# Packs (gitignored, rebuild if lost): .device/s57.txz = scripts/pack_device.sh run build
# .device/s57.txz on main; for each variant v, apply its patch, build cuda_bench and
# cuda_test_megakernel, then
#   tar -cf - --transform "s,cuda_bench\$,cuda_bench_$v,;s,cuda_test_megakernel\$,cuda_test_megakernel_$v," \
#     build/bin/cuda_bench build/bin/cuda_test_megakernel | xz -T2 --lzma2=preset=6,dict=256MiB > .device/$v.txz
# Carry .device/s57.txz, .device/v4.txz, .device/v5.txz and .device/v6.txz.
python3 -c "
import tarfile
for p in ('.device/s57.txz', '.device/v4.txz', '.device/v5.txz', '.device/v6.txz'):
    tarfile.open(p).extractall()"
. scripts/device_env.sh
W=/tmp/s58_1; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
for v in v4 v5 v6; do
  timeout 120 build/bin/cuda_test_megakernel_$v > "$W/test_$v.log" 2>&1
  echo "test $v rc=$?"; tail -2 "$W/test_$v.log"
done
for r in 1 2; do
  for v in main v4 v5 v6; do
    bin=build/bin/cuda_bench; [ $v != main ] && bin=build/bin/cuda_bench_$v
    LOOM_BENCH_MEGA_SWEEPS=none timeout 120 $bin "$W/${v}_$r.json" --megakernel > "$W/${v}_$r.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -E "^(1|8) +[0-9]+ +(graph|mega)" "$W/${v}_$r.log"
  done
done
tar czf "$OUT/s58_1.tgz" -C "$W" .
