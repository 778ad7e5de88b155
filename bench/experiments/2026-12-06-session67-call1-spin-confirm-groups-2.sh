#!/bin/bash
# Prepared in session 66 (its device time ran out), for session 67's first call: four builds of
# the megakernel, each a tests pack in .device/ (repack from the branch if lost:
# `git checkout BRANCH && cmake --build build && scripts/pack_device.sh tests build .device/X.txz`)
#   m66  main (its kernels are 43867df's);
#   rp   branch relaxed-polls: no acquire at all — the bound (session 66: b1 −2.1% H200, −1.0% H100);
#   sc   branch spin-confirm: the first poll an acquire load as on main; a spin that fails it
#        polls relaxed and, once the counter is reached, confirms with one acquire load (an
#        extra L2 round trip on the waits that spun, no L1 invalidation a poll; 120 CCTL in the
#        SASS, main 170);
#   g2   branch attn-groups-2: the attention groups as two groups of 8 warps with 128-key
#        partitions (four of 4 with 64 keys on main, eight of 2 with 32 lost 4.2% at batch 8
#        ctx 7,000 in session 66).
# cuda_bench --megakernel of the four alternated twice, the tests of sc and g2, then loom bench
# --megakernel at batch 1 and 8 of m66, sc and g2. Predicted: sc between main and rp at batch 1
# (or behind main if the confirming round trip costs more than the invalidations); g2 at batch 8
# ctx 7,000 within ±3% of main. Keep either only if `loom bench` gains beyond ~0.5%.
set -u
for v in m66 rp sc g2; do
  mkdir -p $v && (cd $v && python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" ../.device/$v.txz)
done
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
mkdir -p "$OUT/ab"
for r in 1 2; do
  for v in m66 rp sc g2; do
    echo "== $v round $r" >> "$OUT/all.log"
    LOOM_BENCH_MEGA_SWEEPS=none timeout 60 $v/build/bin/cuda_bench "$OUT/ab/${v}_$r.json" --megakernel >> "$OUT/all.log" 2>&1
    echo "== $v round $r rc=$? at ${SECONDS}s"
    grep -A14 "== $v round $r" "$OUT/all.log" | grep -E "^(1|8) .*mega"
  done
done
for v in sc g2; do
  (cd $v && timeout 90 build/bin/cuda_test_megakernel > "$OUT/ab/test_$v.log" 2>&1; echo "$v test rc=$? at ${SECONDS}s")
  grep -E "ERROR|assertions|Status" "$OUT/ab/test_$v.log" | head -3
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in m66 sc g2 m66 sc g2; do
  [ $SECONDS -gt 240 ] && break
  timeout 60 $v/build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,8 \
    --megakernel --json "$OUT/ab/bench_${v}_$SECONDS.json" > "$OUT/ab/bench_${v}_$SECONDS.log" 2>&1
  echo "$v rc=$? at ${SECONDS}s"; ls -t "$OUT"/ab/bench_${v}_*.log | head -1 | xargs tail -n 2
done
tar -czf "$OUT/ab.tgz" -C "$OUT" ab && rm -r "$OUT/ab"
