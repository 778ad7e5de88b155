#!/usr/bin/env bash
# The device sampler on the GPU machine (issue 13 §4), from the repository root with a packed
# build (scripts/pack_device.sh, unpacked): its CUDA tests (test_sampling: every mode against
# the host sampler over 262,145 logits; test_sampling_noise: the uniform and noise-estimate
# bounds over all 2^23 uniforms, the top-p quantum over every u in [0, 40)), then
# `cuda_bench --only sampling` for BUILD and, where BASE is set, for BASE's build (another
# commit's cuda_bench, e.g. unpacked as base/bin), alternated REPEATS times (2), and a table:
# one row a case, µs a step for each run (stdout). Logs go to $OUT as one archive, sampling.tgz
# (tests' logs, device facts, the runs' logs and JSON).
#   BUILD=build BASE=base REPEATS=2 scripts/sampling_check.sh
set -uo pipefail
OUT=${OUT:-$PWD/out-sampling}
BUILD=${BUILD:-build}
BASE=${BASE:-}
REPEATS=${REPEATS:-2}
mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
rc=0
for t in cuda_test_sampling cuda_test_sampling_noise; do
  if [ ! -x "$BUILD/bin/$t" ]; then
    echo "$t: not in $BUILD/bin (not run)"
    continue
  fi
  "$BUILD/bin/$t" > "$OUT/$t.log" 2>&1 || rc=1
  echo "$t: $(grep -E 'test cases:' "$OUT/$t.log" | tail -1)"
done
runs=()
for r in $(seq 1 "$REPEATS"); do
  if [ -n "$BASE" ]; then
    "$BASE/bin/cuda_bench" "$OUT/base$r.json" --only sampling > "$OUT/base$r.log" 2>&1 || rc=1
    runs+=("base$r")
  fi
  "$BUILD/bin/cuda_bench" "$OUT/new$r.json" --only sampling > "$OUT/new$r.log" 2>&1 || rc=1
  runs+=("new$r")
done
# One row a case: the case's name, then each run's microseconds a step.
python3 - "$OUT" "${runs[@]}" <<'PY'
import re, sys
out, runs = sys.argv[1], sys.argv[2:]
cols = {}
for r in runs:
    for line in open(f"{out}/{r}.log"):
        m = re.match(r"sample (.+?rows):\s+([\d.]+) us a step.*?(INVALID)?$", line.rstrip())
        if m:
            cols.setdefault(m.group(1), {})[r] = m.group(2) + (" INVALID" if m.group(3) else "")
print("case".ljust(46) + "".join(r.rjust(12) for r in runs))
for case, v in cols.items():
    print(case.ljust(46) + "".join(v.get(r, "-").rjust(12) for r in runs))
PY
grep -l INVALID "$OUT"/*.log && rc=1
# The device tool returns only a few files a call (two checks in one call must fit): the table
# is on stdout, everything else (tests' logs, device facts, the runs' logs and JSON) in one archive.
(cd "$OUT" && files=$(ls device.txt cuda_test_*.log 2>/dev/null || true) &&
  tar czf sampling.tgz $files $(for r in "${runs[@]}"; do echo "$r.log $r.json"; done) &&
  rm -f $files $(for r in "${runs[@]}"; do echo "$r.log $r.json"; done))
exit $rc
