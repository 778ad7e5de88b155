#!/bin/bash
# Session 64, call 4: loom bench on a Terra-size v1 checkpoint made on the fly, 8 frames after 3
# context frames (scripts/mega_check.sh bench): branch walk-ring d12e44d (.device/w1.txz) at
# batches 1 and 8, the graph path and --megakernel, then main a34acb9's megakernel
# (.device/m64.txz) at batch 8: the end-to-end figure issue 15's targets are in (last measured
# in session 62, 5d461e7: megakernel b1 0.9417, b8 1.4205 s/frame, graphs 0.7994 / 1.0699), and
# whether the ring walk (cuda_bench: b8 ctx 7,000 -1.5%, ctx 600 +1.9%) gains on the bench's
# contexts (~1,750-6,400 keys).
python3 -c "import tarfile; tarfile.open('.device/w1.txz').extractall()"
mkdir -p base && (cd base && python3 -c "import tarfile; tarfile.open('../.device/m64.txz').extractall()")
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 420 bash scripts/mega_check.sh bench > /dev/null 2>&1; echo "bench rc=$?"
for m in graph mega; do tail -4 "$OUT/bench_$m.log"; done
. scripts/device_env.sh
timeout 150 base/build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 8 --megakernel --json "$OUT/base_mega.json" > "$OUT/base_mega.log" 2>&1
echo "base rc=$?"; tail -4 "$OUT/base_mega.log"
rm -f "$OUT/gpu.txt"
