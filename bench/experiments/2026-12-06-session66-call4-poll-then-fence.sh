#!/bin/bash
# Session 66, call 4 (after the four-build call: relaxed polls −2.3% at batch 1 ctx 600 on an
# H200, the tables through ld.global.nc −0.6%, attn-groups-8b +4% at batch 8 ctx 7,000). A
# keepable form of the relaxed polls: branch poll-then-fence (.device/pf.txz) polls with
# ld.relaxed.gpu and runs one fence.acq_rel.gpu a wait (70 CCTL.IVALL in the SASS, main 170,
# relaxed-polls 10); pf-nc (.device/pn.txz) adds nc-tables on top. Against main (m66) and
# relaxed-polls (rp, the bound), alternated twice; then the tests of pf and pn, then loom bench
# --megakernel at batch 1 and 8 of main and the faster of the keepable two.
# Predicted: pf within 0.5% of rp (the cost is the invalidations while spinning), pn = pf.
set -u
for v in m66 rp pf pn; do
  mkdir -p $v && (cd $v && python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" ../.device/$v.txz)
done
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
mkdir -p "$OUT/ab"
for r in 1 2; do
  for v in m66 rp pf pn; do
    echo "== $v round $r" >> "$OUT/all.log"
    LOOM_BENCH_MEGA_SWEEPS=none timeout 60 $v/build/bin/cuda_bench "$OUT/ab/${v}_$r.json" --megakernel >> "$OUT/all.log" 2>&1
    echo "== $v round $r rc=$? at ${SECONDS}s"
    grep -A14 "== $v round $r" "$OUT/all.log" | grep -E "^(1|8) .*mega"
  done
done
for v in pf pn; do
  (cd $v && timeout 90 build/bin/cuda_test_megakernel > "$OUT/ab/test_$v.log" 2>&1; echo "$v test rc=$? at ${SECONDS}s")
  grep -E "ERROR|assertions|Status" "$OUT/ab/test_$v.log" | head -3
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in m66 pf pn m66 pf pn; do
  [ $SECONDS -gt 200 ] && break
  timeout 60 $v/build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 1,8 \
    --megakernel --json "$OUT/ab/bench_${v}_$SECONDS.json" > "$OUT/ab/bench_${v}_$SECONDS.log" 2>&1
  echo "$v rc=$? at ${SECONDS}s"; ls -t "$OUT"/ab/bench_${v}_*.log | head -1 | xargs tail -n 2
done
tar -czf "$OUT/ab.tgz" -C "$OUT" ab && rm -r "$OUT/ab"
