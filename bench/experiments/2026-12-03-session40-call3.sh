#!/bin/bash
# Session 40, call 3 (~7 minutes), the session's last.
# 1. ctest -L cuda on main (a23e03a as committed: b3285d7's helpers were GPU-run only under
#    call 1's il tree).
# 2. Where the 256-job FP8 figure moved: call 2 read session 20's tree (eacbebb) 28,359 and main
#    28,021 tokens/s (256 x 22, one run each). The same at 256 x 10 frames, three trees in
#    turn and back: eacbebb (old), 84a5cfd (mid: session 32's end, before sessions 33-39's TMA
#    decode changes) and main.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('tests', 'old', 'mid')]"
DST=$OUT; W=/tmp/s40c3; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest_main.log" 2>&1; echo "ctest main rc=$?"; grep -E "tests passed|tests failed" "$W/ctest_main.log")
tar czf "$DST/s40c3.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
i=0
for n in old mid main main mid old; do
  i=$((i + 1)); b=.device/$n/bin; [ $n = main ] && b=build/bin
  timeout 100 $b/loom bench --model /tmp/terra --kv-dtype fp8 --frames 10 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256x10_${i}_${n}_fp8.json" > "$W/b256x10_${i}_${n}_fp8.log" 2>&1
  echo "$i $n rc=$? $(grep -A1 -E '^ +jobs' "$W/b256x10_${i}_${n}_fp8.log" | tail -1 | tr -s ' ' | cut -c1-60) | $(grep -o '[0-9.]* ms on the device' "$W/b256x10_${i}_${n}_fp8.log")"
  tar czf "$DST/s40c3.tgz" -C "$W" .
done
