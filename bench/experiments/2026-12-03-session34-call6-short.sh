#!/bin/bash
# Session 34, call 6 as run (the device budget left ~390 s after a long outage): ctest -L cuda on
# main after rope_kv_write's change, then b8 once against the tree before it (old). The longer
# plan, with the shuffled-angles split variant, is 2026-12-03-session34-call6.sh (not run).
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('base', 'old')]"
FINAL=$OUT; OUT=/tmp/s34c6; mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
 grep -E "tests passed|Failed|\*\*\*|Total Test" "$OUT/ctest.log" | head -8)
tar czf "$FINAL/s34c6.tgz" -C "$OUT" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for v in old new; do
  b=build/bin; [ $v = old ] && b=.device/old/bin
  $b/loom bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8 \
    --json "$OUT/bench_${v}.json" > "$OUT/bench_${v}.log" 2>&1
  echo "$v rc=$?"; grep -E '^ +[0-9]+ ' "$OUT/bench_${v}.log" | tr -s ' '
done; tar czf "$FINAL/s34c6.tgz" -C "$OUT" .
