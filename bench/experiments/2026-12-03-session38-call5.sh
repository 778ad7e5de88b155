#!/bin/bash
# Session 38, call 5 (~5 minutes, the session's last device minutes). Call 4 read the sharing
# pair on fr2 at 19,135 / 21,821 tokens/s (1.140x) with no same-call base. Here main before this
# session (99f8c5b: rope_kv_write before every TMA decode launch) against fr2 (RoPE inside every
# bf16 TMA build), 256 jobs x 10 frames bf16, unshared and --shared-group 8 each, one round.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('fr2_tests', 'ab')]"
DST=$OUT; W=/tmp/s38c5; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for n in main fr2; do
  b=build/bin; [ $n = main ] && b=.device/main/bin
  timeout 170 $b/loom bench --model /tmp/terra --frames 10 --context-frames 3 --batch-sizes 1 \
    --num-jobs 256 --shared-group 8 --json "$W/bench_shared_$n.json" > "$W/bench_shared_$n.log" 2>&1
  echo "$n rc=$?"; grep -E "^ +256|groups of" "$W/bench_shared_$n.log" | cut -c1-110
  tar czf "$DST/s38c5.tgz" -C "$W" .
done
