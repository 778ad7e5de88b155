#!/bin/bash
# Session 41, call 3 (~4 minutes; carry .device/s41b.txz: 28230c6's run pack with cuda_bench's
# `--step-case … power`, extracts to build/bin; .device/ncu41.tar: call 1's two ncu reports).
# Call 2 found the 256 x 22 FP8 run at the H200's 700 W cap (clock-event reason 0x4, SW power
# cap, SM clock 1,875-1,965 MHz, ~694 W) while the step case replays at 1,980 MHz. Which part
# of the step draws the power: the step's graph whole, without attention and attention alone,
# each replayed ~8 s at b256 ctx 8,148 (the run's mean), FP8 and bf16, with nvidia-smi sampled
# every 100 ms. And call 1's ncu reports read out per SASS line and raw metrics (stall reasons).
python3 -c "import tarfile; tarfile.open('.device/s41b.txz').extractall(); tarfile.open('.device/ncu41.tar').extractall('.device')"
DST=$OUT; W=/tmp/s41c3; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,power.max_limit --format=csv,noheader | tee "$W/device.txt"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for kv in fp8 bf16; do
  r=.device/ncu41/tma_b256_$kv.ncu-rep
  "$NCU" -i $r --page source --csv --print-source sass > "$W/src_$kv.csv" 2> "$W/src_$kv.err" ||
    "$NCU" -i $r --page source --csv > "$W/src_$kv.csv" 2>> "$W/src_$kv.err"
  "$NCU" -i $r --page raw --csv > "$W/raw_$kv.csv" 2>&1
  echo "ncu $kv: source $(wc -l < "$W/src_$kv.csv") lines, raw $(wc -c < "$W/raw_$kv.csv") bytes"
done
tar czf "$DST/s41c3.tgz" -C "$W" .
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$W/smi.csv" 2>&1 &
SMI=$!
for kv in fp8 bf16; do
  extra=""; [ $kv = fp8 ] && extra=fp8
  timeout 200 build/bin/cuda_bench "$W/power_$kv.json" --step-case 256 8148 $extra power > "$W/power_$kv.log" 2>&1
  echo "power $kv rc=$?"; grep -E 'power window|without (nothing|attention|all but attention) ' "$W/power_$kv.log"
  tar czf "$DST/s41c3.tgz" -C "$W" .
done
kill $SMI
python3 - "$W" <<'PY'
import csv, json, sys, datetime
W = sys.argv[1]
smi = []
for r in csv.reader(open(f"{W}/smi.csv")):
    try:
        t = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
        smi.append((t, int(r[1].split()[0]), float(r[3].split()[0]), r[5].strip()))
    except Exception:
        pass
for kv in ("fp8", "bf16"):
    for row in json.load(open(f"{W}/power_{kv}.json"))["step_case"]:
        for w in row.get("power_windows", []):
            s = [x for x in smi if w["t0"] + 1.0 <= x[0] <= w["t1"]]
            if not s: print(kv, w["without"], "no samples"); continue
            p = sorted(x[2] for x in s); c = sorted(x[1] for x in s)
            capped = sum(x[3] != "0x0000000000000000" for x in s)
            print(f"{kv} without {w['without']:18s} {w['ms']:.3f} ms/replay  power median {p[len(p)//2]:.0f} W  "
                  f"sm median {c[len(c)//2]} MHz (min {c[0]})  {capped}/{len(s)} samples with a clock event  "
                  f"energy/replay {p[len(p)//2]*w['ms']/1e3:.2f} J")
PY
tar czf "$DST/s41c3.tgz" -C "$W" .
