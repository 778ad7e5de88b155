#!/usr/bin/env bash
# The device sampler on the GPU machine (issue 13 §4), from the repository root with a packed
# build (scripts/pack_device.sh, unpacked): its CUDA tests (test_sampling: every mode against
# the host sampler over 262,145 logits; test_sampling_noise: the uniform and noise-estimate
# bounds over all 2^23 uniforms, the top-p quantum over every u in [0, 40)), then
# `cuda_bench --only sampling` for BUILD and, where BASE is set, for BASE's build (another
# commit's cuda_bench, e.g. unpacked as base/bin), alternated REPEATS times (2), and a table:
# one row a case, µs a step for each run (stdout). Logs go to $OUT as one archive, sampling.tgz
# (tests' logs NAME-cuda_test_*.log, device facts, the runs' logs and JSON).
#   BUILD=build BASE=base REPEATS=2 scripts/sampling_check.sh
# VARIANTS="name=dir ..." instead compares any number of builds, alternated in that order, each
# with its tests where its bin holds them (runs NAME1, NAME2, ...):
#   VARIANTS="base=b/new/build hq=hq/build ft=ft/build" scripts/sampling_check.sh
set -uo pipefail
OUT=${OUT:-$PWD/out-sampling}
BUILD=${BUILD:-build}
BASE=${BASE:-}
REPEATS=${REPEATS:-2}
VARIANTS=${VARIANTS:-}
mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
rc=0
# Without VARIANTS: BASE as "base" and BUILD as "new", the tests of "new" only.
tested=
if [ -z "$VARIANTS" ]; then
  VARIANTS="${BASE:+base=$BASE }new=$BUILD"
  tested=new
fi
for v in $VARIANTS; do
  name=${v%%=*} dir=${v#*=}
  [ -n "$tested" ] && [ "$name" != "$tested" ] && continue
  for t in cuda_test_sampling cuda_test_sampling_noise; do
    if [ ! -x "$dir/bin/$t" ]; then
      echo "$name $t: not in $dir/bin (not run)"
      continue
    fi
    log="$OUT/$name-$t.log"
    "$dir/bin/$t" > "$log" 2>&1 || rc=1
    echo "$name $t: $(grep -E 'test cases:' "$log" | tail -1)"
  done
done
runs=()
for r in $(seq 1 "$REPEATS"); do
  for v in $VARIANTS; do
    name=${v%%=*} dir=${v#*=}
    "$dir/bin/cuda_bench" "$OUT/$name$r.json" --only sampling > "$OUT/$name$r.log" 2>&1 || rc=1
    runs+=("$name$r")
  done
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
(cd "$OUT" && files=$(ls device.txt *-cuda_test_*.log 2>/dev/null || true) &&
  tar czf sampling.tgz $files $(for r in "${runs[@]}"; do echo "$r.log $r.json"; done) &&
  rm -f $files $(for r in "${runs[@]}"; do echo "$r.log $r.json"; done))
exit $rc
