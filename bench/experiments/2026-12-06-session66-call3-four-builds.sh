#!/bin/bash
# Session 66's first device call (the device's starts kept failing; the budget allows one or two
# calls): four builds of the megakernel, each a tests pack —
#   m66  main 43867df;
#   rp   branch relaxed-polls: the waits poll with ld.relaxed.gpu and the completing add is
#        release-only, so no CCTL.IVALL (170 in main's SASS, 10 left). Every acquire empties the
#        SM's L1, after which the instruction list, the layer table and the step's inputs are
#        L2 round trips (~1 µs under the weight stream) again. Not keepable (the issue asks for
#        acquire loads): the upper bound of what the invalidation costs;
#   nc   branch nc-tables: those tables through ld.global.nc (keepable, if its lines survive);
#   g8b  branch attn-groups-8b: eight attention groups of 2 warps with 32-key partitions.
# main's cuda_test_megakernel first (the review's multi-partition group settings never ran on a
# GPU), then cuda_bench --megakernel of the four alternated twice (steps table: batch 1 and 8 at
# ctx 600 and 7,000, the graph path beside), then the keepable builds' tests as time allows.
# Predicted: rp b1 ctx 600 1,503 -> 1,440-1,480 us if the post-wait loads sit on the chain
# (±0.5% if they overlap the waits), nc between main and rp; g8b b8 ctx 7,000 2,381-2,406 ->
# ~2,150-2,250, its ctx 600 and b1 unchanged.
set -u
for v in m66 rp nc g8b; do
  mkdir -p $v && (cd $v && python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" ../.device/$v.txz)
done
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
(cd m66 && timeout 200 build/bin/cuda_test_megakernel > "$OUT/test_m66.log" 2>&1; echo "m66 test rc=$? at ${SECONDS}s")
grep -E "ERROR|assertions|Status" "$OUT/test_m66.log" | head -5
mkdir -p "$OUT/ab"
for r in 1 2; do
  for v in m66 rp nc g8b; do
    [ $SECONDS -gt 250 ] && { echo "skip $v round $r at ${SECONDS}s"; continue; }
    echo "== $v round $r" >> "$OUT/all.log"
    LOOM_BENCH_MEGA_SWEEPS=none timeout 90 $v/build/bin/cuda_bench "$OUT/ab/${v}_$r.json" --megakernel >> "$OUT/all.log" 2>&1
    echo "== $v round $r rc=$? at ${SECONDS}s"
    grep -A14 "== $v round $r" "$OUT/all.log" | grep -E "^(1|8) .*mega"
  done
done
tar -czf "$OUT/ab.tgz" -C "$OUT" ab && rm -r "$OUT/ab"
for v in nc g8b rp; do
  [ $SECONDS -gt 300 ] && { echo "skip $v test at ${SECONDS}s"; continue; }
  (cd $v && timeout 90 build/bin/cuda_test_megakernel > "$OUT/test_$v.log" 2>&1; echo "$v test rc=$? at ${SECONDS}s")
  grep -E "ERROR|assertions|Status" "$OUT/test_$v.log" | head -3
done
