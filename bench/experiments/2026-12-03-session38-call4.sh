#!/bin/bash
# Session 38, call 4 (~8 minutes). fr2: call 3's fused RoPE (2534dd0) extended to the TMA decode
# kernel's one-stage builds (K's new row written once K lands, V's once V does; group blocks
# and staggered pairs), so that a bf16 cache never runs rope_kv_write in a decode step. The
# sharing pair's shared run takes the one-stage builds (past one wave of 2-stage blocks), its
# unshared run the 2-stage ones: with call 3 alone the unshared run gained and the shared one
# did not.
# 1. ctest -L cuda on fr2's build (a new test: 256 sequences sharing blocks, fused vs
#    rope_kv_write, output and caches bitwise).
# 2. loom bench b4, 8, 16, one round.
# 3. loom bench 256 jobs x 22 frames bf16, unshared and --shared-group 8 (issue 13's ratio).
# Predicted: tests pass; b4-16 as call 3's fr; the ratio within 1.144-1.151 or better.
python3 -c "import tarfile; tarfile.open('.device/fr2_tests.txz').extractall()"
DST=$OUT; W=/tmp/s38c4; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest_fr2.log" 2>&1; echo "ctest fr2 rc=$?"; grep -E "tests passed|tests failed|Failed|\*\*\*" "$W/ctest_fr2.log" | head)
tar czf "$DST/s38c4.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
timeout 100 build/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
  --batch-sizes 4,8,16 --json "$W/bench_fr2.json" > "$W/bench_fr2.log" 2>&1
echo "fr2 rc=$? $(grep -E '^ +[0-9]+ ' "$W/bench_fr2.log" | tr -s ' ' | cut -c1-40 | tr '\n' '|')"
tar czf "$DST/s38c4.tgz" -C "$W" .
timeout 420 build/bin/loom bench --model /tmp/terra --frames 22 --context-frames 3 --batch-sizes 1 \
  --num-jobs 256 --shared-group 8 --json "$W/bench_shared.json" > "$W/bench_shared.log" 2>&1
echo "shared rc=$?"; grep -E "^ +256|groups of" "$W/bench_shared.log" | cut -c1-150
tar czf "$DST/s38c4.tgz" -C "$W" .
