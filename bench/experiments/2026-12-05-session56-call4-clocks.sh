#!/bin/bash
# Session 56 call 4: call 3's H100 ran main's megakernel at 1,989 us a step (b1 ctx 600) where
# call 2's ran it at 1,793, the graph path 1,345 on both; skip_math showed the dot products
# costing 178 us there and ~10 on call 2's machine. Hypothesis: the SM clock under the
# megakernel (latency-bound chains, 512 threads an SM spinning) differs by machine while the
# memory-bound graph path does not notice. nvidia-smi samples SM/memory clocks, power and the
# throttle reasons every 100 ms while cuda_bench --megakernel runs (skip_math sweep). Carry
# .device/s56.txz and .device/skew56.txz.
python3 -c "import tarfile; tarfile.open('.device/s56.txz').extractall(); tarfile.open('.device/skew56.txz').extractall()"
. scripts/device_env.sh
W=/tmp/s56_4; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
LOOM_BENCH_MEGA_SWEEPS=skip_math timeout 120 build/bin/cuda_bench "$W/clk.json" --megakernel > "$W/clk.log" 2>&1
echo "rc=$?"; kill $SMI
grep -E "^1 |^8 |^ +[0-9]+:" "$W/clk.log"
python3 - "$W/smi.csv" <<'PY'
import sys, collections
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l[0].isdigit() or l.startswith("20")]
c = collections.Counter((r[1], r[5]) for r in rows if len(r) > 5)
for k, n in c.most_common(12): print(n, "samples: sm", k[0], "reasons", k[1])
print("power max", max((float(r[3].split()[0]) for r in rows if len(r) > 3), default=0), "W")
PY
tar czf "$OUT/s56_4.tgz" -C "$W" .
