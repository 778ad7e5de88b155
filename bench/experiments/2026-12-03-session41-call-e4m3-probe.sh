#!/bin/bash
# Prepared in session 40 for session 41 (~1 minute; nothing carried: nvcc on the device builds it).
# The e4m3 -> f16 conversion probe (bench/experiments/2026-12-03-e4m3-convert-throughput.cu):
# checks on the GPU that the bit path times 256 equals cvt.rn.f16x2.e4m3x2 for all 65,536 byte
# pairs but e4m3's NaN codes, and times both per e4m3 value. If the bit path issues at least ~2x
# the values a clock, the FP8 TMA decode kernel's V (and K, with its own byte pairs) can take it
# with 2^8 folded into the V scale and the softmax scale (same bits), toward bf16's 4.29 TB/s
# alone from FP8's 3.85 at b256 ctx 8,000: the lever left for issue 13's 32,000 tokens/s.
W=/tmp/s41p; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$W/e4m3cvt" \
  bench/experiments/2026-12-03-e4m3-convert-throughput.cu > "$W/build.log" 2>&1; echo "build rc=$?"
"$W/e4m3cvt" | tee "$W/probe.log"
cuobjdump -sass "$W/e4m3cvt" 2>/dev/null | grep -E 'F2FP|LOP3|PRMT|SHF|HMUL2' | awk '{print $2}' | sort | uniq -c > "$W/sass_ops.txt"
cat "$W/sass_ops.txt"
rm -f "$W/e4m3cvt"; tar czf "$OUT/s41p.tgz" -C "$W" .
