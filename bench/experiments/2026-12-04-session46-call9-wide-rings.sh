#!/bin/bash
# Session 46, call 9 (carry .device/s46e.tgz, 939e800's build, as the base, and .device/s46g.tgz,
# this change): wider rings where a pass leaves BinSmem free: the zmax pass 8 slots over the
# whole area before sm.ring (7 x 16 KB in flight an SM, not 3), fp32 top-p's count pass 5 past
# its 128 KB of counts, its gathering pass 8 past its 64 KB of candidates. Reading of call 6's
# ncu: the passes are streams at one 1,024-thread block an SM with 48 KB in flight, i.e. bound
# by latency (Little's law: ~1.5-2 us at ~32 GB/s an SM), not by their instructions any more.
# Predicted: fp32 top-p 0.9 alone 292 -> ~250-265 us (sigma 1); bf16 top-p (its zmax-free path)
# unchanged; top-k + top-p rows through the zmax pass a little faster.
python3 -c "import tarfile; tarfile.open('.device/s46e.tgz').extractall('base')"
python3 -c "import tarfile; tarfile.open('.device/s46g.tgz').extractall()"
W=/tmp/s46_9; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
save() { tar czf "$OUT/s46_9.tgz" -C "$W" .; }
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
