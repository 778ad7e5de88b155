#!/bin/bash
# An A/B of the megakernel on the device machine, as session 60's calls 3, 5, 6, 14 and 15 ran
# it: the change's cuda_test_megakernel first, then `cuda_bench --megakernel` of the base and
# the change alternated twice (the steps table: batches 1 and 8 at ctx 600 and 7,000,
# the graph path beside), with the named sweeps (LOOM_BENCH_MEGA_SWEEPS) on both.
#   scripts/mega_ab.sh NEW.txz BASE.txz [SWEEPS] [BATCHES]   (packs of scripts/pack_device.sh;
#   NEW a tests pack, unpacked as build/, BASE unpacked into base/; logs and JSON under $OUT; each
#   run's named sweeps printed at the end, graph replay µs per value). BATCHES (e.g. 8): then
#   `loom bench --megakernel` at those batch sizes, base first (Terra-size v1 made on the fly, 8
#   frames after 3 context frames), and the A/B's JSON tarred (at most 8 files come back).
set -u
new=$1 base=$2 sweeps=${3:-skip_math_b8} batches=${4:-}
. scripts/device_env.sh
unpack_pack "$new"
unpack_pack "$base" base
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 300 build/bin/cuda_test_megakernel > "$OUT/test.log" 2>&1
echo "test rc=$?"; grep -E "ERROR|error|assertions|Status" "$OUT/test.log" | head
for r in 1 2; do
  for v in base new; do
    bin=build/bin/cuda_bench
    [ $v = base ] && bin=base/build/bin/cuda_bench
    echo "== $v round $r" >> "$OUT/all.log"
    LOOM_BENCH_MEGA_SWEEPS=$sweeps timeout 110 $bin "$OUT/${v}_$r.json" --megakernel >> "$OUT/all.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -A14 "== $v round $r" "$OUT/all.log" | grep -E "^(1|8) .*mega"
  done
done
python3 - "$OUT" "$sweeps" <<'PY'
import glob, json, sys
names = sys.argv[2].split(",")
for f in sorted(glob.glob(sys.argv[1] + "/*_[12].json")):
    d = json.load(open(f))
    print(f.split("/")[-1], {k: [round(r["graph_gpu_s"] * 1e6, 1) for r in v]
                             for k, v in d.items() if k.split("_sweep")[0] in names})
PY
[ -z "$batches" ] && exit 0
tar -czf "$OUT/ab_json.tgz" -C "$OUT" base_1.json base_2.json new_1.json new_2.json &&
  rm "$OUT"/base_?.json "$OUT"/new_?.json
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for v in base new; do
  bin=build/bin/loom
  [ $v = base ] && bin=base/build/bin/loom
  timeout 150 $bin bench --model /tmp/terra --frames 8 --context-frames 3 --batch-sizes "$batches" \
    --megakernel --json "$OUT/bench_$v.json" > "$OUT/bench_$v.log" 2>&1
  echo "$v rc=$?"; tail -2 "$OUT/bench_$v.log"
done
