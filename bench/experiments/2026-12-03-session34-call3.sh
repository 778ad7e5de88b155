#!/bin/bash
# Session 34, call 3 (~7 minutes). Batch 1's attention ends in a fold of 4.9 us (count 0.64,
# copies of 52.8 KB of partials 2.40, merges 1.25; session 33's fold-stamped timeline), and one
# cp.async.bulk a round for the copies gained nothing (call 1). This removes the global round
# trip instead: bench/experiments/2026-12-03-attention-split-cluster-fold-env.patch runs the split
# decode kernel as clusters of C blocks a (tile, kv head) (LOOM_ATTN_CLUSTER=C; 0 = main), each
# block keeping its partitions' partials in shared memory; after a cluster barrier every block's
# threads fold (row, 8 dims) items over all partitions in order from the owners' shared memory
# (the same merge_partial chain as combine_partitions: same bits), then a second barrier. No
# threadfence, no counter, no global partials. Blocks take partitions z, z + C, ... (C = 16: one
# each up to ctx 4,096, two above). Predicted: fold 4.9 -> ~1.5 us a layer at b1, b1 -3 to -6%
# where n_parts <= C; the second partition a block (loaded after the first) may eat it above.
# ptxas: bf16 D64 cluster kernel 145 registers, 0 spills (main's 149).
# Build here first:
#   scripts/variant_build.sh -t "loom cuda_test_attention cuda_test_cuda_backend cuda_bench" \
#     -o .device/cl.txz cl=bench/experiments/2026-12-03-attention-split-cluster-fold-env.patch
#   cp this file .device/run.sh; carry .device/cl.txz and .device/run.sh.
python3 -c "import tarfile; tarfile.open('.device/cl.txz').extractall()"
FINAL=$OUT; OUT=/tmp/s34c3; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
for c in 16 8; do for t in cuda_test_attention cuda_test_cuda_backend; do
  LOOM_ATTN_CLUSTER=$c timeout 150 .device/cl/bin/$t > "$OUT/test_c${c}_$t.log" 2>&1
  echo "cluster $c $t rc=$? $(grep -E 'assertions' "$OUT/test_c${c}_$t.log" | tr -s ' ')"
done; done
tar czf "$FINAL/s34c3.tgz" -C "$OUT" .
for c in 0 16 8; do
  LOOM_ATTN_CLUSTER=$c timeout 100 .device/cl/bin/cuda_bench "$OUT/step_c$c.json" --step-case 1 \
    600,2000,4000,6000 > "$OUT/step_c$c.log" 2>&1
  echo "step c$c rc=$?"; grep -iE "ctx|attention|step" "$OUT/step_c$c.log" | head -12
done
tar czf "$FINAL/s34c3.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for r in 1 2 3; do for c in 0 16 8; do
  LOOM_ATTN_CLUSTER=$c .device/cl/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,2 --json "$OUT/bench_c${c}_$r.json" > "$OUT/bench_c${c}_$r.log" 2>&1
  echo "cluster $c r$r rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_c${c}_$r.log" | tr -s ' '
done; tar czf "$FINAL/s34c3.tgz" -C "$OUT" .; done
# Then session 34's prepared second call (the partition probe), unchanged, under the same start:
bash bench/experiments/2026-12-02-session34-call2.sh
