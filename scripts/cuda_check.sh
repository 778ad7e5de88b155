#!/usr/bin/env bash
# GPU check and measurements of the CUDA backend, run on the device machine from the repository
# root with the build folder carried (binaries built elsewhere; rpath $ORIGIN, libsimdjson and the
# CUDA module libloom-cuda.so beside them in bin/; the test_install suite of `ctest -L cuda` also
# needs cmake_install.cmake). Logs and the bench JSON go to $OUT (default ./out-cuda).
#   scripts/cuda_check.sh [tests|bench|all|e2e|inv]   (default all)
# Steps: device facts (nvidia-smi), ctest -L cuda, then build-cuda/bin/cuda_bench.
# e2e: the loom CLI on the CUDA backend: tiny_v1 jobs in f32 / bf16 against the CPU backend
# (tokens), then a Terra-size checkpoint (scripts/make_checkpoint.py) through `loom bench`.
# inv: --batch-invariant: 65 tiny_v1 jobs one at a time vs all together through the CLI in bf16
# (the probe of bench/results/2026-11-22-h200-batch-invariance-probe.json), then cuda_bench in
# batch-invariant mode (compare its decode rows with a default `bench` run: the flag's cost).
set -uo pipefail
what=${1:-all}
OUT=${OUT:-$PWD/out-cuda}
BUILD=${BUILD:-build-cuda}
mkdir -p "$OUT"
root=$PWD

# The binaries were configured at /work/main (test data and CTest paths are absolute).
if [ "$root" != /work/main ] && [ ! -e /work/main ]; then
  mkdir -p /work && ln -s "$root" /work/main
fi

# cuBLAS 13 from the toolkit, or from the Python wheel when the toolkit has none.
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -e "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}" && break
done
if ! ldd "$BUILD/bin/cuda_bench" | grep -q "libcublas.so.13 => /"; then
  w=$(find / -name 'libcublas.so.13' -path '*nvidia*' 2>/dev/null | head -1)
  [ -n "$w" ] && export LD_LIBRARY_PATH="$(dirname "$w"):${LD_LIBRARY_PATH:-}"
fi

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,clocks.max.sm \
    --format=csv
  ldd "$BUILD/bin/cuda_bench" | grep -E "cublas|simdjson|not found"
  ldd "$BUILD/bin/libloom-cuda.so" | grep -E "cublas|not found"
} 2>&1 | tee "$OUT/device.txt"

rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  (cd /work/main/"$BUILD" && ctest -L cuda --output-on-failure --timeout 400) 2>&1 \
    | tee "$OUT/ctest.log" || rc=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  "$BUILD/bin/cuda_bench" "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" || rc=1
fi
if [ "$what" = e2e ]; then
  B=$BUILD/bin
  for d in f32 bf16; do
    $B/loom run --model testdata/tiny_v1 --jobs testdata/jobs/tiny_v1.jsonl \
      --out "$OUT/tiny_cuda_$d.jsonl" --backend cuda --dtype $d -q 2>&1 | tail -3
  done
  $B/loom run --model testdata/tiny_v1 --jobs testdata/jobs/tiny_v1.jsonl \
    --out "$OUT/tiny_cpu.jsonl" --backend cpu --dtype f32 -q 2>&1 | tail -3
  python3 - "$OUT" <<'PY'
import json, sys
o = sys.argv[1]
def toks(p):
    r = {}
    for l in open(p):
        j = json.loads(l)
        r[(j.get("id"), j.get("sample"))] = (j.get("frames"), j.get("tokens"), j.get("status"))
    return r
c, g, b = (toks(o + f) for f in ("/tiny_cpu.jsonl", "/tiny_cuda_f32.jsonl", "/tiny_cuda_bf16.jsonl"))
print("records cpu / cuda f32 / cuda bf16:", len(c), len(g), len(b))
print("cuda f32 tokens == cpu tokens:", c == g)
print("cuda bf16 records with the cpu's tokens:", sum(c[k] == b.get(k) for k in c), "of", len(c))
PY
  (time python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra) 2>&1 | tail -3
  $B/loom bench --model /tmp/terra --backend cuda --frames 2 --batch-sizes 1,8 --profile \
    --json "$OUT/loom_bench.json" 2>&1 | tee "$OUT/loom_bench.log" | tail -45 || rc=1
fi
if [ "$what" = inv ]; then
  B=$BUILD/bin
  python3 - "$OUT/probe.jsonl" <<'PY'
import json, random, sys
P, A, T = 10, 3, 6  # tiny_v1: image slots, action slots, frames a round
with open(sys.argv[1], "w") as f:
    for i in range(65):
        r = random.Random(i)
        ctx = 1 + i % 3
        prompt = []
        for _ in range(ctx):
            prompt += [r.randrange(999) for _ in range(P)] + [-3] * A
        frames = 6
        acts = [[round(r.uniform(-1, 1), 4) for _ in range(3)] for _ in range(A * (ctx + frames))]
        f.write(json.dumps({"id": f"p{i}", "prompt_token_ids": prompt, "actions": acts,
                            "num_frames": frames,
                            "sampling": {"temperature": 0.9, "seed": 100 + i}}) + "\n")
PY
  for n in 1 65; do
    $B/loom run -q --backend cuda --dtype bf16 --batch-invariant --model testdata/tiny_v1 \
      --jobs "$OUT/probe.jsonl" --out "$OUT/probe_inv_$n.jsonl" --max-seqs $n \
      --report "$OUT/probe_inv_$n.report.json" 2>&1 | tail -3 || rc=1
  done
  python3 - "$OUT" <<'PY'
import json, sys
o = sys.argv[1]
def frames(p):
    return {json.loads(l)["id"]: json.loads(l).get("frames") for l in open(p)}
a, b = frames(o + "/probe_inv_1.jsonl"), frames(o + "/probe_inv_65.jsonl")
same = sum(a[k] == b.get(k) for k in a)
print(f"batch-invariant bf16: alone == among 65 for {same}/{len(a)} jobs")
print("report batch_invariant:", json.load(open(o + "/probe_inv_65.report.json"))["batch_invariant"])
PY
  "$BUILD/bin/cuda_bench" "$OUT/bench-inv.json" --batch-invariant 2>&1 | tee "$OUT/bench-inv.log" \
    || rc=1
fi
exit $rc
