#!/usr/bin/env bash
# GPU check and measurements of the CUDA backend, run on the device machine from the repository
# root with the build folder carried (binaries built elsewhere; rpath $ORIGIN, libsimdjson and the
# CUDA module libloom-cuda.so beside them in bin/; the test_install suite of `ctest -L cuda` also
# needs cmake_install.cmake). Logs and the bench JSON go to $OUT (default ./out-cuda).
#   scripts/cuda_check.sh [tests|bench|all|e2e|inv|dataset|shared]   (default all)
# Steps: device facts (nvidia-smi), ctest -L cuda, then build-cuda/bin/cuda_bench.
# e2e: the loom CLI on the CUDA backend: tiny_v1 jobs in f32 / bf16 against the CPU backend
# (tokens), then a Terra-size checkpoint (scripts/make_checkpoint.py) through `loom bench`.
# inv: --batch-invariant: 65 tiny_v1 jobs one at a time vs all together through the CLI in bf16
# (the probe of bench/results/2026-11-22-h200-batch-invariance-probe.json), then cuda_bench in
# batch-invariant mode (compare its decode rows with a default `bench` run: the flag's cost).
# dataset: the dataset factory on the CUDA backend: tiny_v1 runs with --tokens-out killed at
# commit points (LOOM_TEST_FAULT) and resumed, compared with uninterrupted runs (f32, and bf16
# --batch-invariant) and with the cpu; then a Terra-size run with and without --tokens-out
# (tokens/s from the reports: what writing the dataset costs).
# shared: prefix sharing (issue 13's ratio): cuda_bench --shared-case, bf16 b256 in groups of 8
# sharing 1,746 keys (3 context frames) at contexts from the first generated frame's to the
# last's, then loom bench 256 jobs x 22 frames bf16, unshared and --shared-group 8.
set -uo pipefail
what=${1:-all}
OUT=${OUT:-$PWD/out-cuda}
BUILD=${BUILD:-build-cuda}
mkdir -p "$OUT"
. scripts/device_env.sh

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,clocks.max.sm \
    --format=csv
  ldd "$BUILD/bin/cuda_bench" | grep -E "cublas|simdjson|not found"
  ldd "$BUILD/bin/libloom-cuda.so" | grep -E "cublas|not found"
} 2>&1 | tee "$OUT/device.txt"

rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  (cd "$BUILD" && ctest -L cuda --output-on-failure --timeout 400) 2>&1 \
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
if [ "$what" = dataset ]; then
  B=$BUILD/bin
  PY=python3
  d=$OUT/ds
  rm -rf "$d" && mkdir -p "$d"
  $PY - "$d/jobs.jsonl" <<'PY'
import json, random, sys
P, A = 10, 3
with open(sys.argv[1], "w") as f:
    for i in range(60):
        r = random.Random(i)
        ctx, frames = 1 + i % 3, 5
        prompt = []
        for _ in range(ctx):
            prompt += [r.randrange(999) for _ in range(P)] + [-3] * A
        acts = [[round(r.uniform(-1, 1), 4) for _ in range(3)] for _ in range(A * (ctx + frames))]
        f.write(json.dumps({"id": i if i % 2 else f"j{i}", "prompt_token_ids": prompt,
                            "actions": acts, "num_frames": frames, "num_samples": 1 + i % 2,
                            "sampling": {"temperature": 0.9, "seed": 100 + i}}) + "\n")
PY
  common="run -q --model testdata/tiny_v1 --jobs $d/jobs.jsonl --samples-per-file 4"
  $B/loom $common --backend cpu --out "$d/cpu.jsonl" --tokens-out "$d/cpu" || rc=1
  for mode in "f32:--dtype f32" "inv:--dtype bf16 --batch-invariant"; do
    tag=${mode%%:*}; flags=${mode#*:}
    $B/loom $common --backend cuda $flags --out "$d/$tag.ref.jsonl" --tokens-out "$d/$tag.ref" || rc=1
    for fault in data-file:2 manifest:3 record:9; do
      o="$d/$tag.$fault"
      LOOM_TEST_FAULT=$fault $B/loom $common --backend cuda $flags --out "$o.jsonl" \
        --tokens-out "$o" 2>/dev/null
      echo "cuda $tag killed at $fault: rc $?, $(wc -l < "$o.jsonl") records before resume"
      $B/loom $common --backend cuda $flags --out "$o.jsonl" --tokens-out "$o" --resume || rc=1
      $PY tests/dataset_check.py "$o" "$o.jsonl" && echo "  dataset == its results: ok" || rc=1
      $PY - "$d/$tag.ref.jsonl" "$o.jsonl" "$d/cpu.jsonl" <<'PY' || rc=1
import json, sys
def toks(p):
    return {(str(r["id"]), r["sample"]): r["frames"] for r in map(json.loads, open(p))}
ref, got, cpu = (toks(p) for p in sys.argv[1:])
print(f"  resumed == uninterrupted: {got == ref} ({len(got)} samples); == cpu: {got == cpu}")
sys.exit(0 if got == ref else 1)
PY
    done
  done
  (time $PY scripts/make_checkpoint.py --variant v1 --out /tmp/terra) 2>&1 | tail -3
  $PY - "$d/terra.jsonl" <<'PY'
import json, random, sys
P, A, ctx, frames = 576, 6, 3, 8
with open(sys.argv[1], "w") as f:
    for i in range(64):
        r = random.Random(i)
        prompt = []
        for _ in range(ctx):
            prompt += [r.randrange(262144) for _ in range(P)] + [-3] * A
        acts = [[round(r.uniform(-1, 1), 3) for _ in range(3)] for _ in range(A * (ctx + frames))]
        f.write(json.dumps({"id": f"t{i}", "prompt_token_ids": prompt, "actions": acts,
                            "num_frames": frames, "sampling": {"temperature": 0.9, "seed": i}}) + "\n")
PY
  for ds in none dataset; do
    extra=""; [ $ds = dataset ] && extra="--tokens-out $d/terra_ds"
    $B/loom run -q --backend cuda --model /tmp/terra --jobs "$d/terra.jsonl" \
      --out "$d/terra_$ds.jsonl" --report "$d/terra_$ds.report.json" $extra || rc=1
    $PY -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], 'tokens/s', round(r['generated']['tokens_per_s']), 'run s', round(r['time_s']['run'], 2))" \
      "$d/terra_$ds.report.json" "$ds" | tee -a "$OUT/dataset_terra.txt"
  done
  $PY tests/dataset_check.py "$d/terra_ds" "$d/terra_dataset.jsonl" && echo "terra dataset == results: ok"
  ls -la "$d/terra_ds" | head
fi
if [ "$what" = shared ]; then
  for ctx in 1746 3000 8000 12000; do
    "$BUILD/bin/cuda_bench" "$OUT/shared_case_$ctx.json" --shared-case 256 $ctx 8 1746 2>&1 \
      | tee -a "$OUT/shared_case.log" || rc=1
  done
  [ -e /tmp/terra/config.json ] || python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra
  "$BUILD/bin/loom" bench --model /tmp/terra --frames 22 --context-frames 3 --batch-sizes 1 \
    --num-jobs 256 --shared-group 8 --json "$OUT/bench_shared.json" 2>&1 \
    | tee "$OUT/bench_shared.log" || rc=1
fi
exit $rc
