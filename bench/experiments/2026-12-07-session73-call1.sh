#!/bin/bash
# Session 73, call 1 (~500 s): one machine start, a question for whichever GPU comes.
# - An H200: issue 13's FP8 256 x 22 row on main (.device/m73.txz: b6f3690's kernels, main's GPU
#   code since) against 233d877 (.device/m71.txz), after ctest -L cuda on main; main, base, then
#   while the call has time main at --max-batch-slots 16384 (+0.2% on an H100 in session 71, one
#   run) and main again (A/B/A). Predicted ~31,700-31,750 for main (31,331-31,463 in sessions
#   45-52, before the 8,192-slot admission and the 3-block prefill kernel). LAST_START (default
#   440) is the last second at which an optional run starts: 0 runs only main and base (~300 s).
# - An H100: issue 15's table with HF beside it, which the H100 has never had in one call:
#   scripts/bench_hf.sh (loom b1 / b8 over 8 frames, a small job run, HF's loop check, HF eager
#   b1 and b8, HF static-cache torch.compile b1). main's GPU code was ctest'd on an H100 in
#   sessions 71-72, so this branch skips it for the time.
# Every branch samples SM clock and power every 500 ms into smi.csv. A call brings back at most 8
# files, so everything is written under /tmp/s73 and comes back as $OUT/s73.tgz.
# carry: [".device/m73.txz", ".device/m71.txz"]
set -u
. scripts/device_env.sh
D=/tmp/s73; mkdir -p $D
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$D/device.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 \
  > "$D/smi.csv" 2>&1 &
smi=$!
unpack_pack .device/m73.txz .
if grep -q H200 "$D/device.txt"; then
  unpack_pack .device/m71.txz base
  (cd build && timeout 150 ctest -L cuda -j3 --output-on-failure) > "$D/ctest_cuda.log" 2>&1
  echo "ctest rc=$? at ${SECONDS}s"; grep -E "tests passed|Failed" "$D/ctest_cuda.log" | head -3
  python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
  for v in new base new16k new2; do
    bin=build/bin/loom extra=
    [ $v = base ] && bin=base/build/bin/loom
    [ $v = new16k ] && extra="--max-batch-slots 16384"
    [ $v != new ] && [ $v != base ] && [ $SECONDS -ge "${LAST_START:-440}" ] && continue
    log=$D/b256_fp8_$v
    echo "$v starts at ${SECONDS}s" >> "$D/marks.txt"
    timeout 150 $bin bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
      --batch-sizes 1 --num-jobs 256 $extra --json "$log.json" > "$log.log" 2>&1
    echo "$v rc=$? at ${SECONDS}s" | tee -a "$D/marks.txt"
    grep -E "^ +256 |steps:" "$log.log" | tail -2
    tar czf "$OUT/s73.tgz" -C /tmp s73  # what ran so far, should the call be cut short
  done
else
  echo "not an H200: issue 15's table with HF"
  timeout 540 scripts/bench_hf.sh "$D/hf" --frames 8 --jobs 16 --hf-frames 1 \
    --hf-compile-frames 2 --budget-s 520 --ckpt /tmp/terra > "$D/bench_hf.log" 2>&1
  echo "bench_hf rc=$? at ${SECONDS}s"; tail -25 "$D/bench_hf.log"
fi
kill $smi 2>/dev/null
tar czf "$OUT/s73.tgz" -C /tmp s73
