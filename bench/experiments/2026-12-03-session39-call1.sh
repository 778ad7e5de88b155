#!/bin/bash
# Session 39, call 1 (~6 minutes).
# 1. Batch 8's attention timeline on main with RoPE inside the TMA decode kernel (a0ec638):
#    session 38's call 1 probe rebased (bench/experiments/2026-12-03-probe-tma-timeline-fused-
#    rope.patch), under loom bench b8, summarised by 2026-12-03-probe-tma-timeline.py. Session 38's
#    call 1 (rope_kv_write between qkv and attention): qkv end -> wait 5.79 us, first tile 0.86,
#    chain ~5.5 (4 tiles), count 0.32, fold 5.34, end -> o wait 0.74. Expected: qkv end -> wait
#    ~1 us (session 38's call 3 took ~1.9 us a layer off batch 8, not the ~4 predicted).
# 2. pf (bench/experiments/2026-12-03-pipelined-staged-fold.patch): combine_partitions_staged
#    copies groups of cap / 3 partitions through 3 buffers, up to 3 groups in flight while the
#    oldest merges (the same merges in the same order), instead of whole rounds of cap (15 at
#    25 partitions: two rounds, each a full L2 round trip before any merge). pf's attention,
#    shared-attention, batch-invariance and rope-attention tests (bitwise across kernels).
# 3. cuda_bench --attention-case b8 ctx 2000 / 5000: main and pf.
# 4. loom bench b1, 4, 8, 16: main and pf, two rounds.
# Predicted: the TMA kernel's last-chunk fold 5.3 -> ~3 us a layer at b8: b4-b16 -1.5 to -2.5%;
# b1 within noise (its fold is the spread one).
# Build: scripts/variant_build.sh -t "loom" -o .device/probe2.txz probe=<probe patch>;
#   scripts/variant_build.sh -t "loom cuda_bench cuda_test_attention cuda_test_attention_shared
#   cuda_test_batch_invariance cuda_test_rope_attention" -o .device/pf.txz pf=<pf patch>;
#   main's scripts/pack_device.sh run build .device/base.txz. Carry the three.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('probe2', 'base', 'pf')]"
DST=$OUT; W=/tmp/s39c1; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
LOOM_PROBE=$W/probe timeout 120 .device/probe/bin/loom bench --model /tmp/terra --frames 8 \
  --context-frames 3 --batch-sizes 8 --json "$W/bench_probe_b8.json" > "$W/bench_probe_b8.log" 2>&1
echo "probe b8 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_probe_b8.log" | tr -s ' ' | cut -c1-40)"
python3 bench/experiments/2026-12-03-probe-tma-timeline.py "$W/probe" 220 | tee "$W/timeline.txt"
gzip -k "$W"/probe.* 2>/dev/null; rm -f "$W"/probe.attention_tma "$W"/probe.gemv "$W"/probe.gemv_mma "$W"/probe.attention_mma
tar czf "$DST/s39c1.tgz" -C "$W" .
for t in cuda_test_attention cuda_test_attention_shared cuda_test_batch_invariance cuda_test_rope_attention; do
  timeout 150 .device/pf/bin/$t > "$W/test_pf_$t.log" 2>&1
  echo "pf $t rc=$? $(grep -E 'assertions' "$W/test_pf_$t.log" | tr -s ' ')"
done
tar czf "$DST/s39c1.tgz" -C "$W" .
for c in "8 2000" "8 5000"; do
  set -- $c
  for n in main pf; do
    b=build/bin; [ $n = pf ] && b=.device/pf/bin
    timeout 60 $b/cuda_bench "$W/attn_${n}_b$1_ctx$2.json" --attention-case $1 $2 > "$W/attn_${n}_b$1_ctx$2.log" 2>&1
    echo "$n attn b$1 ctx $2 rc=$? $(grep -E "TMA config [05]|: mma " "$W/attn_${n}_b$1_ctx$2.log" | sed 's/attention decode //' | cut -c28-75 | tr '\n' '|')"
  done
done
tar czf "$DST/s39c1.tgz" -C "$W" .
run() {  # name bin round
  timeout 150 $2/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
    --batch-sizes 1,4,8,16 --json "$W/bench_$1_$3.json" > "$W/bench_$1_$3.log" 2>&1
  echo "$1 r$3 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_$1_$3.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
}
for r in 1 2; do run main build/bin $r; run pf .device/pf/bin $r; tar czf "$DST/s39c1.tgz" -C "$W" .; done
