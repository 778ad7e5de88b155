#!/bin/bash
# Session 43, call 4 (~4 minutes; carry .device/tests43c.txz: this tree's test pack, extracts to
# build/; .device/tests43b.txz: b905150's, extracted under /tmp/base).
# The change: both decode kernels compute the step's new K/V row (fused RoPE: loads from qkv,
# rotation, quantization, the cache write) before their tile loops, beside q's loads, and store
# it into its tile from registers; before, the warp holding the new key loaded it after that
# tile's wait, a load's latency on the last tile's path. The same values and bits.
# Predicted: batch 1 and 8 (short, latency-bound attention) ~0.5-1% a frame; the 256-job run
# unchanged (one tile in ~125 a pair). Not timed here for lack of device time.
# 1. ctest -L cuda on the new tree.
# 2. loom bench bf16, 8 frames, 3 context frames, batch 1 and 8: new, base.
python3 -c "import tarfile; tarfile.open('.device/tests43c.txz').extractall(); tarfile.open('.device/tests43b.txz').extractall('/tmp/base')"
DST=$OUT; W=/tmp/s43c4; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
tail -4 "$W/ctest.log"
tar czf "$DST/s43c4.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
i=0
for n in new base; do
  i=$((i + 1)); B=build/bin; [ $n = base ] && B=/tmp/base/build/bin
  timeout 100 $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,8 \
    --json "$W/b18_${n}$i.json" > "$W/b18_${n}$i.log" 2>&1
  echo "$n$i rc=$? $(grep -E '^ +[0-9]+ ' "$W/b18_${n}$i.log" | tr -s ' ' | cut -c1-32 | tr '\n' '|')"
  tar czf "$DST/s43c4.tgz" -C "$W" .
done
