#!/bin/bash
# Session 40, call 2 (~8 minutes).
# 1. il2 (the fold's interleaved merges for kItems > 1 only; call 1's il took the split kernel
#    147 -> 228 registers and cuda_test_gemv's fit check caught it): the GEMV fit and the four
#    attention tests.
# 2. Issue 13's FP8 figure: call 1 read 28,397 tokens/s (256 x 22, il) against session 20's
#    29,748. Session 20's measured tree (eacbebb, .device/old) and main (a23e03a, .device/main)
#    in one call, the same command.
# 3. loom bench bf16 b4, 8, 16: main and il2 alternated, two rounds. Predicted b8 -1 to -2%.
# 4. cuda_bench --step-case 256 8000 fp8 on main (session 20: step 7.68 ms, attention alone 5.79,
#    without attention 1.80).
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('tests', 'base', 'old')]"
DST=$OUT; W=/tmp/s40c2; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
for t in cuda_test_gemv cuda_test_attention cuda_test_attention_shared cuda_test_batch_invariance cuda_test_rope_attention; do
  timeout 100 build/bin/$t > "$W/test_il2_$t.log" 2>&1
  echo "il2 $t rc=$? $(grep -E 'assertions' "$W/test_il2_$t.log" | tr -s ' ')"
done
tar czf "$DST/s40c2.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for n in old main; do
  timeout 250 .device/$n/bin/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256_${n}_fp8.json" > "$W/b256_${n}_fp8.log" 2>&1
  echo "b256 fp8 $n rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_${n}_fp8.log" | tail -1; grep 'replayed' "$W/b256_${n}_fp8.log"
  tar czf "$DST/s40c2.tgz" -C "$W" .
done
run() {  # name bin round
  timeout 100 $2/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 4,8,16 --json "$W/bench_$1_r$3.json" > "$W/bench_$1_r$3.log" 2>&1
  echo "$1 r$3 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_r$3.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run main .device/main/bin $r; run il2 build/bin $r; done
tar czf "$DST/s40c2.tgz" -C "$W" .
timeout 100 .device/main/bin/cuda_bench "$W/step_main_b256_fp8.json" --step-case 256 8000 fp8 > "$W/step_main_b256_fp8.log" 2>&1
echo "step case rc=$?"; grep -E 'without (nothing|attention|all but attention|layer GEMMs|lm_head|norms)' "$W/step_main_b256_fp8.log"
tar czf "$DST/s40c2.tgz" -C "$W" .
