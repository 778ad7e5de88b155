#!/bin/bash
# Session 57 call 4: the megakernel's dynamic buffer on a 128-byte boundary (v3).
# Call 3's smem_skew sweep on b43a19c (H100): the ring 16 bytes past a 128-byte boundary
# (where the 4,880-byte static MegaShared leaves it, skew 0) 1,781-1,783 us; 128-aligned (skew
# 112) 1,705.7, 1,024-aligned (240) 1,707.0. v3 aligns the buffer in the kernel (and rounds the
# staged input's bytes up to 128, so the ring and attention's buffers stay aligned). Predicted:
# b1 ctx 600 ~-75 us against b43a19c, the other rows a little. Also call 3's two other leads,
# now with the aligned ring: gemv_ahead off (-22 us there) and gemv_inflight 1 (-8).
# ctest -L cuda on v3 first. Carry .device/s57v3t.txz (v3, extracted as build/) and
# .device/s57t.txz (b43a19c, extracted under m/).
python3 -c "import tarfile; tarfile.open('.device/s57v3t.txz').extractall(); tarfile.open('.device/s57t.txz').extractall('m')"
. scripts/device_env.sh
W=/tmp/s57_4; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 300 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?")
grep -E "tests passed|Failed|\*\*\*" "$W/ctest.log" | tail -8
for r in 1 2; do
  for v in main v3; do
    bin=build/bin/cuda_bench; [ $v = main ] && bin=m/build/bin/cuda_bench
    sw=gemv_ahead,gemv_inflight; [ $v = v3 ] && [ $r = 1 ] && sw=gemv_ahead,gemv_inflight,smem_skew
    LOOM_BENCH_MEGA_SWEEPS=$sw timeout 150 $bin "$W/${v}_$r.json" --megakernel > "$W/${v}_$r.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -E "^(1|8) +[0-9]+ +(graph|mega)|^ +[0-9]+: graph|^(the|bytes)" "$W/${v}_$r.log"
  done
done
tar czf "$OUT/s57_4.tgz" -C "$W" .
