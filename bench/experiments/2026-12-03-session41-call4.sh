#!/bin/bash
# Session 41, call 4 (~8 minutes; carry .device/tests.txz: this tree's test pack, extracts to
# build/; .device/base.txz: main 28230c6's run pack, extracts to .device/main/bin).
# The change: the TMA decode kernel looks a tile's block-table entries up a tile ahead and makes
# them cache slots where the copies are issued (no division for blocks of <= 64 slots, none for
# the box count but on the last tile): call 1's ncu put ~13% of the FP8 kernel's stall samples
# on the product computed right after the lookup, and ~45 instructions a 64-key tile (of 852) in
# two integer divisions. Same slots, same bits. And FP8 caches in cuda_bench filled with random
# e4m3 (the KV quantizer's rounding of uniform(-1, 1)) instead of 0x30 everywhere.
# 1. ctest -L cuda on this tree.
# 2. --attention-case 256 8000 4 fp8 / bf16 (random caches now) and the step case with power.
# 3. loom bench 256 x 22 FP8: main then this tree, nvidia-smi sampled throughout.
python3 -c "import tarfile; [tarfile.open(f'.device/{n}.txz').extractall() for n in ('tests', 'base')]"
DST=$OUT; W=/tmp/s41c4; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
(cd build && timeout 200 ctest -L cuda --output-on-failure > "$W/ctest.log" 2>&1; echo "ctest rc=$?" >> "$W/ctest.log")
tail -4 "$W/ctest.log"
tar czf "$DST/s41c4.tgz" -C "$W" .
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 200 > "$W/smi.csv" 2>&1 &
SMI=$!
for kv in fp8 bf16; do
  extra=""; [ $kv = fp8 ] && extra=fp8
  timeout 60 build/bin/cuda_bench "$W/attn_$kv.json" --attention-case 256 8000 4 $extra > "$W/attn_$kv.log" 2>&1
  echo "attention case $kv rc=$?: $(grep -E 'TMA|tma' "$W/attn_$kv.log" | head -3 | tr '\n' '|')"
done
echo "--- step case power $(date +%s.%N)" >> "$W/smi_marks.txt"
timeout 150 build/bin/cuda_bench "$W/power_fp8.json" --step-case 256 8148 fp8 power > "$W/power_fp8.log" 2>&1
echo "step case fp8 rc=$?"; grep -E 'power window|without (nothing|attention|all but attention) ' "$W/power_fp8.log"
tar czf "$DST/s41c4.tgz" -C "$W" .
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra > /dev/null 2>&1
for n in main new; do
  B=build/bin; [ $n = main ] && B=.device/main/bin
  echo "--- bench $n $(date +%s.%N)" >> "$W/smi_marks.txt"
  timeout 200 $B/loom bench --model /tmp/terra --kv-dtype fp8 --frames 22 --context-frames 3 \
    --batch-sizes 1 --num-jobs 256 --json "$W/b256_${n}_fp8.json" > "$W/b256_${n}_fp8.log" 2>&1
  echo "b256 fp8 $n rc=$?"; grep -A1 -E '^ +jobs' "$W/b256_${n}_fp8.log" | tail -1 | cut -c1-60; grep 'replayed' "$W/b256_${n}_fp8.log"
  tar czf "$DST/s41c4.tgz" -C "$W" .
done
echo "--- end $(date +%s.%N)" >> "$W/smi_marks.txt"
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
def window(name, t0, t1):
    s = [x for x in smi if t0 <= x[0] <= t1]
    if not s: print(name, "no samples"); return
    p = sorted(x[2] for x in s); c = sorted(x[1] for x in s)
    capped = sum(x[3] != "0x0000000000000000" for x in s)
    print(f"{name:34s} power median {p[len(p)//2]:.0f} W  sm median {c[len(c)//2]} MHz (min {c[0]})  {capped}/{len(s)} capped")
for row in json.load(open(f"{W}/power_fp8.json"))["step_case"]:
    for w in row.get("power_windows", []):
        window(f"fp8 replay without {w['without']} {w['ms']:.3f} ms", w["t0"] + 1.0, w["t1"])
marks = [l.split() for l in open(f"{W}/smi_marks.txt")]
for a, b in zip(marks, marks[1:]):
    if a[1] == "bench":  # the 256-job part: past the batch-1 latency row (first ~25 s)
        window(f"bench {a[2]} (from 25 s on)", float(a[3]) + 25, float(b[-1]))
PY
tar czf "$DST/s41c4.tgz" -C "$W" .
