#!/bin/bash
# Session 39, call 4 (~6 minutes), on main f1e2ea5 (+ this script's patches):
# 1. ctest -L cuda on main with session 39's three kept commits (FP8 fused RoPE, the qkv GEMV
#    beside the split kernel over FP8, the acquire-release count).
# 2. loom bench bf16 b1, 4, 8, 16: main, bk, bk2, one round each.
#    bk (bench/experiments/2026-12-03-fold-bulk-copy.patch): the TMA kernel's last chunk brings
#    each fold round's partials by one cp.async.bulk on a fold mbarrier of its own, not 62
#    16-byte cp.async a lane (call 3's probe: issuing round 1 took 0.99 us, its data 0.16 more).
#    bk2 (…-fold-bulk-copy-batched-merges.patch): bk, and the merges' shared loads 4 partitions
#    ahead (call 3: the merges 3.01 us for 25 partitions, ~190 cycles each).
#    Predicted: bk fold 5.8 -> ~4.5 us, b4-b16 -1 to -1.5%; bk2 fold ~3.5 us, b4-b16 -2 to -3%.
# 3. bk's and bk2's attention, shared-attention, batch-invariance and rope-attention tests.
# 4. loom bench --kv-dtype fp8 b1, 8, 16 on main (call 2 measured f8r and f8b apart).
# 5. cuda_bench --attention-case b8 ctx 2000 / 5000: main and bk.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('tests', 'bk', 'bk2')]"
DST=$OUT; W=/tmp/s39c4; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest_main.log" 2>&1; echo "ctest main rc=$?"; grep -E "tests passed|tests failed" "$W/ctest_main.log")
tar czf "$DST/s39c4.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name bin kv
  timeout 150 $2/loom bench --model /tmp/terra --kv-dtype $3 --frames 8 --context-frames 3 \
    --batch-sizes $4 --json "$W/bench_$1_$3.json" > "$W/bench_$1_$3.log" 2>&1
  echo "$1 $3 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$3.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
run main build/bin bf16 1,4,8,16; run bk .device/bk/bin bf16 1,4,8,16; run bk2 .device/bk2/bin bf16 1,4,8,16
tar czf "$DST/s39c4.tgz" -C "$W" .
for n in bk bk2; do
  for t in cuda_test_attention cuda_test_attention_shared cuda_test_batch_invariance cuda_test_rope_attention; do
    timeout 150 .device/$n/bin/$t > "$W/test_${n}_$t.log" 2>&1
    echo "$n $t rc=$? $(grep -E 'assertions' "$W/test_${n}_$t.log" | tr -s ' ')"
  done
  tar czf "$DST/s39c4.tgz" -C "$W" .
done
run main build/bin fp8 1,8,16
tar czf "$DST/s39c4.tgz" -C "$W" .
for c in "8 2000" "8 5000"; do
  set -- $c
  for n in main bk; do
    b=build/bin; [ $n = bk ] && b=.device/bk/bin
    timeout 60 $b/cuda_bench "$W/attn_${n}_b$1_ctx$2.json" --attention-case $1 $2 > "$W/attn_${n}_b$1_ctx$2.log" 2>&1
    echo "$n attn b$1 ctx $2 rc=$? $(grep -E "TMA config [05]|: mma " "$W/attn_${n}_b$1_ctx$2.log" | sed 's/attention decode //' | cut -c28-75 | tr '\n' '|')"
  done
done
tar czf "$DST/s39c4.tgz" -C "$W" .
