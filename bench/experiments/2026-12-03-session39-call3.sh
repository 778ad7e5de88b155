#!/bin/bash
# Session 39, call 3 (~6 minutes).
# 1. The fold probe (bench/experiments/2026-12-03-probe-tma-fold.patch): call 1's probe plus one
#    record a last chunk with stamps counted, fenced, round 1's copies issued, round 1 in, merges
#    done, written, end, under loom bench b8. Call 1: the fold 5.39 us (median), and the
#    pipelined fold (copies of later partitions in flight while the first merge) was +0.9-1.0 us
#    slower, so the round trips are not what the fold waits on.
# 2. fa (bench/experiments/2026-12-03-count-acq-rel.patch): the threadfence reduction's count in
#    both decode kernels as one atom.acq_rel.gpu by lane / thread 0 after a __syncwarp /
#    __syncthreads, instead of a __threadfence (fence.sc.gpu) on every thread before the count and
#    again in the folding chunk after it (the same bits). fa's attention, shared-attention,
#    batch-invariance and rope-attention tests.
# 3. cuda_bench --attention-case b8 ctx 2000 / 5000 and b1 ctx 5000: main and fa.
# 4. loom bench b1, 4, 8, 16: main and fa, two rounds.
# Predicted (fa): 0-1 us a layer where the fences wait on the chunk's own stores; b1-b16 0 to -1.5%.
# Build: scripts/variant_build.sh -t "loom" -o .device/probe3.txz probe=<probe patch>;
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_attention cuda_test_attention_shared
#   cuda_test_batch_invariance cuda_test_rope_attention" -o .device/fa.txz fa=<fa patch>;
#   main's scripts/pack_device.sh run build .device/base.txz. Carry the three.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('probe3', 'base', 'fa')]"
DST=$OUT; W=/tmp/s39c3; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
LOOM_PROBE=$W/probe timeout 120 .device/probe/bin/loom bench --model /tmp/terra --frames 8 \
  --context-frames 3 --batch-sizes 8 --json "$W/bench_probe_b8.json" > "$W/bench_probe_b8.log" 2>&1
echo "probe b8 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_probe_b8.log" | tr -s ' ' | cut -c1-40)"
python3 bench/experiments/2026-12-03-probe-tma-timeline.py "$W/probe" 220 | tee "$W/timeline.txt"
gzip "$W"/probe.* 2>/dev/null
tar czf "$DST/s39c3.tgz" -C "$W" .
for t in cuda_test_attention cuda_test_attention_shared cuda_test_batch_invariance cuda_test_rope_attention; do
  timeout 150 .device/fa/bin/$t > "$W/test_fa_$t.log" 2>&1
  echo "fa $t rc=$? $(grep -E 'assertions' "$W/test_fa_$t.log" | tr -s ' ')"
done
tar czf "$DST/s39c3.tgz" -C "$W" .
for c in "8 2000" "8 5000" "1 5000"; do
  set -- $c
  for n in main fa; do
    b=build/bin; [ $n = fa ] && b=.device/fa/bin
    timeout 60 $b/cuda_bench "$W/attn_${n}_b$1_ctx$2.json" --attention-case $1 $2 > "$W/attn_${n}_b$1_ctx$2.log" 2>&1
    echo "$n attn b$1 ctx $2 rc=$? $(grep -E "TMA config [05]|: mma " "$W/attn_${n}_b$1_ctx$2.log" | sed 's/attention decode //' | cut -c28-75 | tr '\n' '|')"
  done
done
tar czf "$DST/s39c3.tgz" -C "$W" .
run() {  # name bin round
  timeout 150 $2/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,4,8,16 --json "$W/bench_$1_$3.json" > "$W/bench_$1_$3.log" 2>&1
  echo "$1 r$3 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$3.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run main build/bin $r; run fa .device/fa/bin $r; tar czf "$DST/s39c3.tgz" -C "$W" .; done
