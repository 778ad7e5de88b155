#!/bin/bash
# Session 57 call 2: the megakernel's dot loop with 16-byte shared-memory loads (v1).
# Call 1's ncu of a b1 ctx 600 step (H200): the bf16 dot loop read each 16-byte chunk of the
# ring and of the staged input as four 32-bit LDS, four lanes to a bank (739 LDS against 16
# LDS.128 in the bf16 M=1 build), and its unpack and LDS lines held the most samples of the
# step besides the waits' barrier; skip_math 0 - 1 was 436 us there. v1 loads each chunk by
# one ld.shared.v4 and drops the per-chunk test of whole segments (0 spills, 116-128
# registers). Predicted: b1 ctx 600 1,942 -> ~1,600-1,700 us on an H200 like call 1's, the
# skip_math 1-3 rows unchanged. First cuda_test_megakernel with v1, then main and v1
# and v2 alternated twice (the main table and skip_math at b1 ctx 600), then ncu of v2's step as in
# call 1. v2: v1 with the bf16 unpack as one shift or one mask a value (the intrinsic's high
# half took a PRMT and a shift). Carry .device/s57.txz (main), .device/v1.txz and .device/v2.txz.
python3 -c "import tarfile; tarfile.open('.device/s57.txz').extractall(); tarfile.open('.device/v1.txz').extractall(); tarfile.open('.device/v2.txz').extractall()"
. scripts/device_env.sh
W=/tmp/s57_2; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
for v in v1 v2; do
  timeout 150 build/bin/cuda_test_megakernel_$v > "$W/test_$v.log" 2>&1
  echo "test $v rc=$?"; tail -2 "$W/test_$v.log"
done
for r in 1 2; do
  for v in main v1 v2; do
    bin=build/bin/cuda_bench; [ $v != main ] && bin=build/bin/cuda_bench_$v
    LOOM_BENCH_MEGA_SWEEPS=skip_math timeout 150 $bin "$W/${v}_$r.json" --megakernel \
      > "$W/${v}_$r.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -E "^(1|8) +[0-9]+ +(graph|mega)|^ +[0-3]: graph" "$W/${v}_$r.log"
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
LOOM_BENCH_MEGA_SWEEPS=none timeout 300 "$NCU" --kernel-name regex:megakernel --launch-skip 10 \
  --launch-count 1 --set full --import-source yes -o "$W/mega_v2" \
  build/bin/cuda_bench_v2 "$W/ncu_v2.json" --megakernel > "$W/ncu_run.log" 2>&1
echo "ncu rc=$?"
"$NCU" -i "$W/mega_v2.ncu-rep" --page details --csv > "$W/details_v2.csv" 2>&1
"$NCU" -i "$W/mega_v2.ncu-rep" --page source --csv --print-source sass > "$W/sass_v2.csv" 2>&1
grep -E '"(Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Registers Per Thread|Executed Instructions)"' \
  "$W/details_v2.csv" | cut -d, -f12- | head -12
xz -T4 -6 "$W/sass_v2.csv"
cp "$W/sass_v2.csv.xz" "$OUT/"
tar czf "$OUT/s57_2.tgz" -C "$W" --exclude "sass_v2.csv*" --exclude "*.ncu-rep" .
ls -la "$OUT"
