#!/bin/bash
# Session 65, call 4: call 3's attention groups with the weight pump's stop fixed (it asked
# whether an AttnPartial has work by the old 64-256-key partitions, so where attention's
# buffers reach into the ring, at long_spec's 8 slots in the tests and Terra's 4, the stream ran
# on over a group's k / v: inf logits in cuda_test_megakernel; Terra's batch 8 keeps attention
# inside the staged input, so call 3's timings stand). .device/grp.txz against .device/m64.txz:
# cuda_test_megakernel, base / change twice, loom bench batch 8, then compute-sanitizer memcheck
# and synccheck on the bf16 comparisons.
set -u
bash scripts/mega_ab.sh .device/grp.txz .device/m64.txz none
tar -czf "$OUT/ab_json.tgz" -C "$OUT" base_1.json base_2.json new_1.json new_2.json &&
  rm "$OUT"/base_?.json "$OUT"/new_?.json
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in base new; do
  bin=build/bin/loom
  [ $v = base ] && bin=base/build/bin/loom
  timeout 150 $bin bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes 8 \
    --megakernel --json "$OUT/bench_$v.json" > "$OUT/bench_$v.log" 2>&1
  echo "$v rc=$?"; tail -2 "$OUT/bench_$v.log"
done
(cd "$OUT" && tar -czf bench.tgz bench_base.json bench_base.log bench_new.json bench_new.log &&
  rm bench_base.json bench_base.log bench_new.json bench_new.log)
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck synccheck; do
  LOOM_TEST_MEGA_TIMEOUT_S=100 timeout 100 "$cs" --tool $tool --kernel-name kns=megakernel \
    --error-exitcode 3 build/bin/cuda_test_megakernel \
    -tc="bf16 megakernel near the graph path (6e-2) at block*" > "$OUT/sanitize_$tool.txt" 2>&1
  echo "$tool rc=$?"; tail -3 "$OUT/sanitize_$tool.txt"
done
