#!/bin/bash
# Session 46, call 7 (carry .device/s46d.tgz, b4334be's build, as the base, and .device/s46e.tgz,
# this change): fp32 top-p's gathering pass compares each logit with the draw's and the cut's
# value intervals (two float compares each; the ends found by a 32-way search a warp, 7 rounds,
# instead of one thread's 32-step bisection), and the device's top-p quantum converts u · 4096
# by an FFMA.RZ against 2^23 instead of F2I (cuda_test_sampling_noise checks every u in
# [0, 40)). ncu after call 5 (call 6): 300 us at ncu's clocks, the gathering pass ~28% of the
# stalls at ~16 instructions a logit, the count pass ~26%. Predicted: fp32 top-p 0.9 alone 295
# -> ~260-270 us (sigma 1), the other modes unchanged.
python3 -c "import tarfile; tarfile.open('.device/s46d.tgz').extractall('base')"
python3 -c "import tarfile; tarfile.open('.device/s46e.tgz').extractall()"
W=/tmp/s46_7; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
save() { tar czf "$OUT/s46_7.tgz" -C "$W" .; }
timeout 120 build/bin/cuda_test_sampling > "$W/test_sampling.log" 2>&1; echo "cuda_test_sampling rc=$?"
tail -3 "$W/test_sampling.log"
timeout 120 build/bin/cuda_test_sampling_noise > "$W/test_sampling_noise.log" 2>&1; echo "cuda_test_sampling_noise rc=$?"
tail -3 "$W/test_sampling_noise.log"; save
for round in 1 2; do
  for v in base new; do
    B=build/bin; [ $v = base ] && B=base/build/bin
    timeout 120 $B/cuda_bench "$W/sampling_${v}_$round.json" --only sampling > "$W/sampling_${v}_$round.log" 2>&1
    echo "$v round $round rc=$?"
    save
  done
done
python3 - "$W" <<'PY'
import json, sys, glob
W = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{W}/sampling_*_*.json")):
    v, r = f.split("_")[-2], f.split("_")[-1][:-5]
    for e in json.load(open(f))["sampling"]:
        if e["rows"] != 256: continue
        k = (e["mode"], e["logits"], e["sigma"])
        rows.setdefault(k, {})[f"{v}{r}"] = (e["us"], e["valid"])
for k, d in rows.items():
    print(f"{k[0]:22s} {k[1]:4s} s{k[2]:.0f}  " + "  ".join(f"{n} {u:7.1f}{'' if ok else ' INVALID'}" for n, (u, ok) in sorted(d.items())))
PY
save
