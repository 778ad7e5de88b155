#!/bin/bash
# Session 46's sampling A/B calls (4, 5, 7, 9), one body: `bash THIS CALL BASE_PACK NEW_PACK`
# from the repository root on the device. BASE_PACK unpacks under base/, NEW_PACK in place (each
# holds build/bin's cuda_bench, CUDA module and sampling tests); the tests of the new build,
# then `cuda_bench --only sampling` for base and new alternated twice, and a table of the 256-row
# cases (µs, base then new). Logs and JSON go to $OUT/s46_CALL.tgz. (scripts/sampling_check.sh
# does the same for later sessions.)
CALL=$1 BASE_PACK=$2 NEW_PACK=$3
python3 -c "import tarfile; tarfile.open('$BASE_PACK').extractall('base')"
python3 -c "import tarfile; tarfile.open('$NEW_PACK').extractall()"
W=/tmp/s46_$CALL; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
save() { tar czf "$OUT/s46_$CALL.tgz" -C "$W" .; }
timeout 120 build/bin/cuda_test_sampling > "$W/test_sampling.log" 2>&1; echo "cuda_test_sampling rc=$?"
tail -3 "$W/test_sampling.log"
if [ -x build/bin/cuda_test_sampling_noise ]; then  # (in the packs of calls 7 and 9)
  timeout 120 build/bin/cuda_test_sampling_noise > "$W/test_sampling_noise.log" 2>&1; echo "cuda_test_sampling_noise rc=$?"
  tail -3 "$W/test_sampling_noise.log"
fi
save
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
