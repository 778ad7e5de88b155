#!/bin/bash
# Prepared in session 41 for session 42 (~5 minutes; carry .device/s42base.txz, HEAD's run pack
# (extracts to build/bin), .device/lookup_old.txz and .device/probe{1,2,3}.txz (extract to
# .device/NAME/bin; scripts/variant_build.sh builds of bench/experiments/2026-12-03-tma-lookup-
# ahead-reverted.patch and 2026-12-03-tma-energy-probe{1,2,3}.patch, the latter setting
# kernels/attention_swap.cuh's LOOM_TMA_PROBE to 1 / 2 / 3).
# Session 41 found the 256-job FP8 run at the H200's 700 W cap: energy a step (~5.6 J: attention
# ~4.25, the rest ~1.34) costs ~3-10% of the figure by the machine. Where do attention's joules go? The step case's power
# windows (b256 ctx 8,148, random e4m3 cache, ~8 s a window, nvidia-smi every 100 ms) for:
#   base: HEAD;  probe 1: no tile math (TMA copies, barriers and merges only);
#   probe 2: no e4m3 conversions;  probe 3: no MMAs (conversions kept).
# The outputs of probes are garbage; only the joules a replay (median W x ms) of the window
# "without all but attention" (attention and embed alone) are read. If probe 1 saves most of
# attention's energy, the SM's tile work is the lever (fewer instructions or cheaper ones); if it
# saves little, the bytes' path (HBM, L2, TMA) is, and no kernel change will buy the ~7% that
# 32,000 tokens/s needs at the cap.
# First, fcd5e03 at full clock: --attention-case 256 8000 4 fp8 on HEAD and on HEAD with
# fcd5e03's kernel change reverted (.device/lookup_old.txz, from
# bench/experiments/2026-12-03-tma-lookup-ahead-reverted.patch), alternated, random caches in
# both (the 256-job run under the cap moved +0.18% / +0.45%; the cap eats part of any speed-up).
# With them, nomask (bench/experiments/2026-12-03-tma-whole-tile-no-mask.patch, .device/nomask.txz
# with its attention tests): the swapped tile skips the causal mask on tiles whose 64 keys both
# of the lane's heads attend to (~35 of a tile's ~800 instructions; the same bits, which its
# four attention tests check first).
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('s42base', 'probe1', 'probe2', 'probe3', 'lookup_old', 'nomask')]"
DST=$OUT; W=/tmp/s42e; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
for t in cuda_test_attention cuda_test_batch_invariance cuda_test_attention_shared cuda_test_rope_attention; do
  timeout 100 .device/nomask/bin/$t > "$W/nomask_$t.log" 2>&1
  echo "nomask $t rc=$? $(grep -E 'assertions' "$W/nomask_$t.log" | tr -s ' ')"
done
for r in 1 2; do
  for n in base lookup_old nomask; do
    B=build/bin; [ $n != base ] && B=.device/$n/bin
    timeout 60 $B/cuda_bench "$W/attn_${n}_r$r.json" --attention-case 256 8000 4 fp8 > "$W/attn_${n}_r$r.log" 2>&1
    echo "attention case $n r$r: $(grep -E 'TMA config 0 ' "$W/attn_${n}_r$r.log")"
  done
done
for n in base probe1 probe2 probe3; do
  B=build/bin; [ $n != base ] && B=.device/$n/bin
  timeout 120 $B/cuda_bench "$W/power_$n.json" --step-case 256 8148 fp8 power > "$W/power_$n.log" 2>&1
  echo "$n rc=$?"; grep -E 'power window' "$W/power_$n.log"
  tar czf "$DST/s42e.tgz" -C "$W" .
done
kill $SMI
python3 scripts/power_windows.py "$W/smi.csv" base="$W/power_base.json" probe1="$W/power_probe1.json" \
  probe2="$W/power_probe2.json" probe3="$W/power_probe3.json" | tee "$W/energy.txt"
tar czf "$DST/s42e.tgz" -C "$W" .
