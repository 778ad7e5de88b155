#!/bin/bash
# Prepared in session 44 for session 45: `bash THIS 1`, `… 2`, `… 3` (carry .device/s45.txz, a
# tests pack of 3ff8740 or later (call 2 needs --gemm-rows-case): scripts/pack_device.sh tests build .device/s45.txz).
# Question: does the KV block size 64 (one TMA box of 64 rows a tile, K and V, where block
# size 16 issues four, each a waterfall loop of ~9 uniform-datapath warp instructions) lift the
# power-capped 256 x 22 FP8 run? Same bits: the tokens do not depend on the block size (the
# attention tests at 16 / 32 / 64 / 128; `loom run --backend cpu` on tiny_v1 at 16 and 64 gave
# equal frames). Predicted: FP8 256 x 22 +0.5-1.5% (fewer instructions and TMA issues a tile;
# session 44's lo8, 36 instructions, measured +0.2%); nothing at full clock in the attention case.
# 1: ctest -L cuda; --attention-case 256 8000 4 fp8|bf16 at block sizes 16 and 64; 256 x 22 FP8
#    at 16, 64 (with power and clocks).
# 2: 256 x 22 FP8 at 64, 16 (the other order); bf16 8 frames b1 / b8 at 16 and 64; the layer
#    GEMMs at 256 / 262 / 268 / 320 rows with power (`cuda_bench --gemm-rows-case`): what the
#    action-slot steps' 6 extra rows a sequence cost under the cap. Predicted: 262 rows take a
#    third 128-row tile of MMAs; if its joules a replay are >= 15% over 256's, the chunk steps
#    cost ~1% of the run's energy and the GEMMs' row tiling for 257-320 rows is the next lever.
# 3: the bf16 sharing pair (--shared-group 8) at block size 64 (session 44: 1.162-1.165x at 16).
CALL=${1:-1}
python3 -c "import tarfile; tarfile.open('.device/s45.txz').extractall()"
W=/tmp/s45_$CALL; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
B=build/bin
save() { tar czf "$OUT/s45_$CALL.tgz" -C "$W" .; }
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
b256() {  # block size
  echo "--- bench bs$1 $(date +%s.%N)" >> "$W/smi_marks.txt"
  timeout 170 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --block-size $1 --json "$W/b256_bs$1.json" > "$W/b256_bs$1.log" 2>&1
  echo "b256 fp8 bs$1 rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_bs$1.log" | tail -1 | cut -c1-60
  echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
  python3 scripts/power_windows.py "$W/smi.csv" marks="$W/smi_marks.txt" > "$W/energy.txt"
  save
}
smi() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
  SMI=$!
}
if [ "$CALL" = 1 ]; then
  (cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
  tail -3 "$W/ctest.log"; save
  for d in fp8 bf16; do
    for bs in 16 64; do
      timeout 60 $B/cuda_bench "$W/attn_${d}_bs$bs.json" --attention-case 256 8000 4 $d $bs \
        > "$W/attn_${d}_bs$bs.log" 2>&1
      echo "attention case $d bs$bs: $(grep -E 'TMA config 0 ' "$W/attn_${d}_bs$bs.log")"
    done
  done
  save
  smi; b256 16; b256 64; kill $SMI
elif [ "$CALL" = 2 ]; then
  smi; b256 64; b256 16; kill $SMI
  for bs in 16 64; do
    timeout 100 $B/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,8 \
      --block-size $bs --json "$W/b18_bs$bs.json" > "$W/b18_bs$bs.log" 2>&1
    echo "bs$bs b1/b8 rc=$? $(grep -E '^ +[0-9]+ ' "$W/b18_bs$bs.log" | tr -s ' ' | cut -c1-32 | tr '\n' '|')"
    save
  done
  # The layer GEMMs at the rows of a decode step (256) and of steps with 1 / 2 sequences on
  # action slots (262, 268; 39% of the run's steps), and 320, each replayed ~8 s under nvidia-smi.
  smi
  timeout 150 $B/cuda_bench "$W/gemm_rows.json" --gemm-rows-case 256,262,268,320,256,262 power \
    > "$W/gemm_rows.log" 2>&1
  echo "gemm rows rc=$?"; grep -E '^m ' "$W/gemm_rows.log"
  kill $SMI
  python3 scripts/power_windows.py "$W/smi.csv" rows="$W/gemm_rows.json" | tee "$W/gemm_rows_energy.txt"
  save
else
  timeout 400 $B/loom bench --model /tmp/terra --frames 22 --context-frames 3 --batch-sizes 1 \
    --num-jobs 256 --shared-group 8 --block-size 64 --json "$W/shared_bs64.json" > "$W/shared_bs64.log" 2>&1
  echo "shared bs64 rc=$?"; grep -A4 -E '^ +jobs' "$W/shared_bs64.log" | cut -c1-60; tail -1 "$W/shared_bs64.log"
  save
fi
cat "$W/energy.txt" 2>/dev/null
