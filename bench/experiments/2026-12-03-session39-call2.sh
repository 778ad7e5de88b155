#!/bin/bash
# Prepared in session 38 for session 39 (built here, not run; ~8 minutes). f8r
# (bench/experiments/2026-12-03-fused-rope-fp8.patch): RoPE and the new key inside both decode
# kernels over an FP8 cache too (q rotated, rounded to bf16 as rope_kv_write stores it, then
# load_q_f8's clamp and f16 packing, the angles shuffled from the lane that computed them; the
# new row quantized by kv_from_f32<fp8_e4m3> into the tile as the cache holds it), so no decode
# step runs rope_kv_write. ptxas: the TMA e4m3 builds 238-242 registers, the split kernel's 123,
# 0 spills.
# f8b (bench/experiments/2026-12-03-fused-rope-fp8-qkv-beside.patch): f8r, and the one-row qkv
# GEMV at 88 registers beside the split kernel over an FP8 cache too (bf16: -2.3% at b1 in
# session 33; FP8 had rope_kv_write between them until f8r).
# Build here first: scripts/variant_build.sh -t "loom cuda_bench cuda_test_attention
#   cuda_test_rope_attention cuda_test_kv_fp8" -o .device/f8r.txz f8r=<patch>,
#   scripts/variant_build.sh -t loom -o .device/f8b.txz f8b=<f8b patch>, and main's
#   `scripts/pack_device.sh run build .device/base.txz`; carry the three and .device/run.sh.
# 1. f8r's attention, rope-attention and FP8 tests (the fused-RoPE test compares the fused split
#    and TMA kernels with rope_kv_write's output and caches bitwise, e4m3 included).
# 2. loom bench --kv-dtype fp8 b1, 8, 16: main and f8r, two rounds.
# 3. 256 jobs x 10 frames --kv-dtype fp8: main and f8r, one round each.
# 4. f8b: FP8 b1, two rounds (against step 2's main and f8r rows).
# Predicted: b1-b16 FP8 -1 to -3% (one kernel and boundary fewer a layer: bf16's fusion took
# 1.5-2.6% off b4-b16); 256 jobs within +-1% (bf16 at 256 measured +-0.4%).
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'f8r', 'f8b')]"
DST=$OUT; W=/tmp/s39c2; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
for t in cuda_test_attention cuda_test_rope_attention cuda_test_kv_fp8; do
  timeout 150 .device/f8r/bin/$t > "$W/test_f8r_$t.log" 2>&1
  echo "f8r $t rc=$? $(grep -E 'assertions' "$W/test_f8r_$t.log" | tr -s ' ')"
done
tar czf "$DST/s39c2.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
run() {  # name bin round
  timeout 150 $2/loom bench --model /tmp/terra --kv-dtype fp8 --frames 8 --context-frames 3 \
    --batch-sizes 1,8,16 --json "$W/bench_$1_$3.json" > "$W/bench_$1_$3.log" 2>&1
  echo "$1 r$3 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$3.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run main build/bin $r; run f8r .device/f8r/bin $r; tar czf "$DST/s39c2.tgz" -C "$W" .; done
for n in main f8r; do
  b=build/bin; [ $n = f8r ] && b=.device/f8r/bin
  timeout 150 $b/loom bench --model /tmp/terra --kv-dtype fp8 --frames 10 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/bench256_$n.json" > "$W/bench256_$n.log" 2>&1
  echo "$n 256x10 rc=$?"; grep -E "^ +256" "$W/bench256_$n.log" | cut -c1-100
  tar czf "$DST/s39c2.tgz" -C "$W" .
done
for r in 1 2; do
  timeout 100 .device/f8b/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 8 --context-frames 3 \
    --batch-sizes 1 --json "$W/bench_f8b_$r.json" > "$W/bench_f8b_$r.log" 2>&1
  echo "f8b r$r rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_f8b_$r.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
done
tar czf "$DST/s39c2.tgz" -C "$W" .
