#!/bin/bash
# Session 47, call 5: the draw's chunks a row, 64 (call 1's "new" build, .device/draw.tgz) against
# 32 and 16 (.device/chunks.tgz: the same tree with kSampleChunks 32 / 16, cuda_bench only),
# alternated twice, `cuda_bench --only sampling`. Fewer chunks: fewer blocks that leave at once
# after a top-p filter (64 x 256 cost ~22 us, call 1's ncu) and fewer per-chunk reductions and
# partials, twice or four times the groups a thread a chunk.
mkdir -p draw && python3 -c "import tarfile; tarfile.open('.device/draw.tgz').extractall('draw')"
python3 -c "import tarfile; tarfile.open('.device/chunks.tgz').extractall('.')"
cp draw/build/bin/libsimdjson.so.* c32/build/bin/; cp draw/build/bin/libsimdjson.so.* c16/build/bin/
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for r in 1 2; do
  for b in draw c32 c16; do
    $b/build/bin/cuda_bench "$OUT/$b-$r.json" --only sampling > "$OUT/$b-$r.log" 2>&1
  done
done
python3 - "$OUT" <<'PY'
import re, sys
out = sys.argv[1]
runs = [f"{b}-{r}" for r in (1, 2) for b in ("draw", "c32", "c16")]
cols = {}
for r in runs:
    for line in open(f"{out}/{r}.log"):
        m = re.match(r"sample (.+?rows):\s+([\d.]+) us a step.*?(\d+)/(\d+) rows", line.rstrip())
        if m and "256 rows" in line:
            cols.setdefault(m.group(1), {})[r] = m.group(2) + ("" if m.group(3) == m.group(4) else "!")
print("case".ljust(46) + "".join(r.rjust(9) for r in runs))
for case, v in cols.items():
    print(case.ljust(46) + "".join(v.get(r, "-").rjust(9) for r in runs))
PY
