#!/bin/bash
# Session 44: `bash THIS lf` then `bash THIS base`. lf = HEAD with
# bench/experiments/2026-12-04-tma-lane-offsets-held.patch and
# 2026-12-04-tma-bf16-fragments-in-order.patch (diet without the unroll by 2, which lost 0.9% on
# 256 x 22 FP8 in call A). Carry .device/lf.txz (lf's test pack) and .device/tests43b.txz (base).
# lf: the attention tests, the sharing pair (256 x 22 bf16, --shared-group 8: unshared and shared
# in one run), 256 x 22 FP8. base: the sharing pair (the same machine's base ratio).
N=${1:-lf}
python3 - "$N" <<'PY'
import sys, tarfile
n = 'tests43b' if sys.argv[1] == 'base' else sys.argv[1]
tarfile.open(f'.device/{n}.txz').extractall(f'/tmp/{sys.argv[1]}')
PY
W=/tmp/s44$N; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
B=/tmp/$N/build/bin
save() { tar czf "$OUT/s44$N.tgz" -C "$W" .; }
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
if [ $N != base ]; then
  for t in cuda_test_attention cuda_test_attention_shared cuda_test_batch_invariance cuda_test_rope_attention cuda_test_kv_fp8; do
    timeout 100 $B/$t > "$W/${N}_$t.log" 2>&1
    echo "$N $t rc=$? $(grep -E 'assertions' "$W/${N}_$t.log" | tr -s ' ')"
  done
fi
timeout 400 $B/loom bench --model /tmp/terra --frames 22 --context-frames 3 --batch-sizes 1 \
  --num-jobs 256 --shared-group 8 --json "$W/shared_$N.json" > "$W/shared_$N.log" 2>&1
echo "shared $N rc=$?"; grep -A4 -E '^ +jobs' "$W/shared_$N.log" | cut -c1-60; tail -1 "$W/shared_$N.log"
save
[ $N = base ] && exit 0
timeout 170 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
  --batch-sizes 1 --num-jobs 256 --json "$W/b256_$N.json" > "$W/b256_$N.log" 2>&1
echo "b256 fp8 $N rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_$N.log" | tail -1 | cut -c1-60
save
