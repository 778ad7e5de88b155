#!/bin/bash
# Session 46, call 5 (carry .device/s46c.tgz, call 4's change = ccc2e52, as the base, and
# .device/s46d.tgz, this change): fp32 top-p alone's count pass with z_of's branch taken once a
# pass and no id check in whole rounds, and its gathering pass testing each logit's order key
# against the draw's and the cut's quantum intervals (found by bisection; q is monotone in the
# key) instead of computing its quantum. ncu (call 3): the count pass ~27 instructions a logit
# and 39% of the filter's stalls, the gathering pass ~22 and 33%. Predicted: fp32 top-p 0.9
# alone 330 -> ~260-280 us at 256 rows; bf16 top-p unchanged or slightly faster (its gathering
# pass skips the id check in whole rounds); every other mode unchanged.
python3 -c "import tarfile; tarfile.open('.device/s46c.tgz').extractall('base')"
python3 -c "import tarfile; tarfile.open('.device/s46d.tgz').extractall()"
W=/tmp/s46_5; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
save() { tar czf "$OUT/s46_5.tgz" -C "$W" .; }
timeout 120 build/bin/cuda_test_sampling > "$W/test_sampling.log" 2>&1; echo "cuda_test_sampling rc=$?"
tail -3 "$W/test_sampling.log"; save
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
