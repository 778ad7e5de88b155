#!/bin/bash
# Several builds of the megakernel in one device call, as session 66's calls 3 and 4 ran them
# (four builds × two rounds of cuda_bench took ~15 s, so one machine start serves them all):
#   scripts/mega_abn.sh "BUILD…" ["TESTS…"] ["BENCHES…"] [BATCHES]
# Each BUILD is a tests pack .device/BUILD.txz (scripts/pack_device.sh), unpacked into BUILD/.
# `cuda_bench --megakernel` of every build, alternated twice (the steps table: batch 1 and 8 at
# ctx 600 and 7,000, graph replay µs a step, the graph path beside); then cuda_test_megakernel of
# TESTS; then `loom bench --megakernel` at BATCHES (default 1,8) of BENCHES, twice in turn, while
# the call is under 240 s (Terra-size v1 made on the fly, 8 frames after 3 context frames). The
# JSON and logs are tarred into $OUT/ab.tgz (at most 8 files come back from a call).
set -u
builds=$1 tests=${2:-} benches=${3:-} batches=${4:-1,8}
. scripts/device_env.sh
for v in $builds; do unpack_pack ".device/$v.txz" "$v"; done
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
mkdir -p "$OUT/ab"
for r in 1 2; do
  for v in $builds; do
    echo "== $v round $r" >> "$OUT/all.log"
    LOOM_BENCH_MEGA_SWEEPS=none timeout 60 "$v/build/bin/cuda_bench" "$OUT/ab/${v}_$r.json" \
      --megakernel >> "$OUT/all.log" 2>&1
    echo "== $v round $r rc=$? at ${SECONDS}s"
    grep -A14 "== $v round $r" "$OUT/all.log" | grep -E "^(1|8) .*mega"
  done
done
for v in $tests; do
  (cd "$v" && timeout 90 build/bin/cuda_test_megakernel > "$OUT/ab/test_$v.log" 2>&1
   echo "$v test rc=$? at ${SECONDS}s")
  grep -E "ERROR|assertions|Status" "$OUT/ab/test_$v.log" | head -3
done
if [ -n "$benches" ]; then
  python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
  for v in $benches $benches; do
    [ $SECONDS -gt 240 ] && break
    log=$OUT/ab/bench_${v}_$SECONDS  # (the second the run started: two runs a build)
    timeout 60 "$v/build/bin/loom" bench --model /tmp/terra --frames 8 --context-frames 3 \
      --batch-sizes "$batches" --megakernel --json "$log.json" > "$log.log" 2>&1
    echo "$v rc=$? at ${SECONDS}s"; tail -n 2 "$log.log"
  done
fi
tar -czf "$OUT/ab.tgz" -C "$OUT" ab && rm -r "$OUT/ab"
