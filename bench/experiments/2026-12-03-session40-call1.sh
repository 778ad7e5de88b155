#!/bin/bash
# Session 40, call 1 (~7 minutes), on main a23e03a + the fold's interleaved merges (il):
# 1. ctest -L cuda on il (main's b3285d7, the RoPE-angle / q-load helpers, was not GPU-run).
# 2. loom bench bf16 b1, 4, 8, 16: main (.device/main) and il alternated, two rounds.
#    il: fold_staged merges partition-major, so a lane's kItems (2 in the TMA kernel) chains run
#    side by side; the same merges in the same order per item (same bits; the split kernel's
#    kItems 1 is unchanged). Predicted: the TMA fold's merges 3.0 -> ~1.7 us at b8, b4-b16 -1 to
#    -2%, b1 unchanged.
# 3. Where batch 1 and 8's wall time goes: the throughput rows (num-jobs 1 and 8) print the
#    decode graph's device time a step beside the wall time.
# 4. Issue 13's FP8 figure, 256 jobs x 22 frames on il (not measured since session 20: 29,748).
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('tests', 'base')]"
DST=$OUT; W=/tmp/s40c1; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest_il.log" 2>&1; echo "ctest il rc=$?"; grep -E "tests passed|tests failed" "$W/ctest_il.log")
tar czf "$DST/s40c1.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name bin kv batches round
  timeout 150 $2/loom bench --model /tmp/terra --kv-dtype $3 --frames 8 --context-frames 3 \
    --batch-sizes $4 --json "$W/bench_$1_$3_r$5.json" > "$W/bench_$1_$3_r$5.log" 2>&1
  echo "$1 $3 r$5 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$3_r$5.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run main .device/main/bin bf16 1,4,8,16 $r; run il build/bin bf16 1,4,8,16 $r; done
tar czf "$DST/s40c1.tgz" -C "$W" .
for j in 1 8; do
  timeout 100 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1 \
    --num-jobs $j --json "$W/tput_il_j$j.json" > "$W/tput_il_j$j.log" 2>&1
  echo "tput j$j rc=$?"; grep -E 'decode steps replayed|^ +[0-9]+ +0 ' "$W/tput_il_j$j.log"
done
tar czf "$DST/s40c1.tgz" -C "$W" .
timeout 280 build/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
  --batch-sizes 1 --num-jobs 256 --json "$W/b256_il_fp8.json" > "$W/b256_il_fp8.log" 2>&1
echo "b256 fp8 rc=$?"; tail -8 "$W/b256_il_fp8.log"
tar czf "$DST/s40c1.tgz" -C "$W" .
