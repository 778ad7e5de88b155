#!/bin/bash
# Prepared in session 40 for session 41 (~7 minutes): where the ~0.7% at 256 jobs FP8 between
# session 20's tree (eacbebb, "old": 39,222 / 39,125 tokens/s at 256 x 10 in session 40's call 3)
# and session 32's end (84a5cfd, "mid": 38,918 / 38,895) came in. Three trees between them:
#   11c37ad  before the TMA kernel's group blocks (49f3c8d; sessions 21-23's shared-prefix work in)
#   eedbb8b  group blocks, the host's group rule (cafc0a5) and draw stream 4's CPU side in; the
#            device sampler's stream 4 (5e33836) not
#   5e33836  the device sampler's stream 4
# then sessions 27-32's GEMV work up to mid. Carry .device/{old,mid,bisect_11c37ad,
# bisect_eedbb8b,bisect_5e33836}.txz (built in session 40 with `cmake -DLOOM_TESTS=OFF` and
# `make loom loom_cuda_backend` in a worktree of each, then `scripts/pack_device.sh run
# .device/<name> .device/<name>.txz`; rebuild them the same way if the checkout lost .device/).
# Each tree runs 256 x 8 frames FP8 twice, in the order there and back.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('old', 'mid', 'bisect_11c37ad', 'bisect_eedbb8b', 'bisect_5e33836')]"
DST=$OUT; W=/tmp/s41b; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
i=0
for n in old bisect_11c37ad bisect_eedbb8b bisect_5e33836 mid mid bisect_5e33836 bisect_eedbb8b bisect_11c37ad old; do
  i=$((i + 1))
  timeout 80 .device/$n/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 8 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256x8_${i}_${n}.json" > "$W/b256x8_${i}_${n}.log" 2>&1
  echo "$i $n rc=$? $(grep -A1 -E '^ +jobs' "$W/b256x8_${i}_${n}.log" | tail -1 | tr -s ' ' | cut -c1-60) | $(grep -o '[0-9.]* ms on the device' "$W/b256x8_${i}_${n}.log")"
  tar czf "$DST/s41b.tgz" -C "$W" .
done
