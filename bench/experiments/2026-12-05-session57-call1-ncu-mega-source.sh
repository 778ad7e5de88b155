#!/bin/bash
# Session 57 call 1: where the batch-1 megakernel's time goes, line by line (issue 15).
# Sessions 55-56: the waits cost ~390 us a step, the streaming with neither math nor waits is
# 1.30x the floor with any ring depth, the staging ~218 us a CTA, the dot products 10-220 us
# depending on the machine; the one ncu of the kernel (session 10) gave whole-step numbers
# only. Here: the machine first (the main table and skip_math 0-3 at b1 ctx 600), then ncu of
# one b1 ctx 600 megakernel step with warp-state sampling per SASS instruction and per CUDA
# line (SourceCounters; loom_cuda builds with -lineinfo), exported as CSV for offline reading.
# Carry .device/s57.txz (scripts/pack_device.sh run build .device/s57.txz).
python3 -c "import tarfile; tarfile.open('.device/s57.txz').extractall()"
. scripts/device_env.sh
W=/tmp/s57_1; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
LOOM_BENCH_MEGA_SWEEPS=skip_math timeout 200 build/bin/cuda_bench "$W/base.json" --megakernel \
  > "$W/base.log" 2>&1
echo "base rc=$?"; grep -vE "^\s*$" "$W/base.log" | head -30
# The 11th megakernel launch: batch 1 ctx 600 (the graph path's steps come first and are not
# megakernel launches; 5 warm-up steps, then the timed ones).
LOOM_BENCH_MEGA_SWEEPS=none timeout 420 "$NCU" --kernel-name regex:megakernel --launch-skip 10 \
  --launch-count 1 --set full --import-source yes -o "$W/mega" \
  build/bin/cuda_bench "$W/ncu.json" --megakernel > "$W/ncu_run.log" 2>&1
echo "ncu rc=$?"; tail -4 "$W/ncu_run.log"
"$NCU" -i "$W/mega.ncu-rep" --page details --csv > "$W/details.csv" 2>&1
"$NCU" -i "$W/mega.ncu-rep" --page source --csv --print-source sass > "$W/sass.csv" 2>&1
"$NCU" -i "$W/mega.ncu-rep" --page source --csv --print-source cuda > "$W/cuda.csv" 2>&1
grep -E '"(Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Registers Per Thread|Executed Instructions|L1/TEX Hit Rate|Shared Memory|Bank)' \
  "$W/details.csv" | cut -d, -f12- | head -30
ls -la "$W"
xz -T4 -6 "$W/sass.csv" "$W/cuda.csv" 2>/dev/null || gzip -6 "$W/sass.csv" "$W/cuda.csv"
cp "$W"/sass.csv.* "$W"/cuda.csv.* "$OUT/" 2>/dev/null
tar czf "$OUT/s57_1.tgz" -C "$W" --exclude "sass.csv*" --exclude "cuda.csv*" --exclude mega.ncu-rep .
# Then batch 1 and 8 on the graph path with loom bench (8 frames, 3 context frames): issue 15's
# numbers on today's main for this GPU (the last H200 ones were session 52's).
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > "$W/ckpt.log" 2>&1
echo "ckpt rc=$?"
timeout 150 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 1,8 --json "$W/b18_graph.json" > "$W/b18_graph.log" 2>&1
echo "b18 rc=$?"; tail -8 "$W/b18_graph.log"
tar czf "$OUT/s57_1.tgz" -C "$W" --exclude "sass.csv*" --exclude "cuda.csv*" --exclude mega.ncu-rep .
ls -la "$OUT"
