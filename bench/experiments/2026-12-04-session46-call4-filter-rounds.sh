#!/bin/bash
# Session 46, call 4 (carry .device/s46b.txz, main's e13c00f run pack, and .device/s46c.tgz, the
# change's cuda_bench, cuda_test_sampling and CUDA module): for_each_logit's rounds told apart by
# the round (plain 16-byte copies at a running address, no id checks or vote where the round's
# chunks are all whole). ncu (call 3) counted ~49 instructions a round of the ring (4 fp32 logits
# a thread) in each of fp32 top-p's three passes, ~1/3 of the filter's 202 M; the change's hot
# round is ~42 instructions where it was ~64 (zmax pass, SASS). Predicted: fp32 top-p 0.9 alone
# 347 -> ~300 us at 256 rows, bf16 top-p and top-k a few % faster, the draw-only modes unchanged.
# cuda_test_sampling first (the host sampler's tokens, every mode), then `--only sampling` for
# base and change alternated twice.
python3 -c "import tarfile; tarfile.open('.device/s46b.txz').extractall('base')"
python3 -c "import tarfile; tarfile.open('.device/s46c.tgz').extractall()"
W=/tmp/s46_4; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
save() { tar czf "$OUT/s46_4.tgz" -C "$W" .; }
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
