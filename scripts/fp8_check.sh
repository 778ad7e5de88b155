#!/usr/bin/env bash
# The FP8 KV cache on the device machine (README "FP8 KV cache"), from the repository root with
# the build folder carried (as scripts/cuda_check.sh). Logs and JSON go to $OUT.
#   scripts/fp8_check.sh att      decode attention, bf16 vs fp8 cache (cuda_bench --attention-case)
#   scripts/fp8_check.sh terra    a Terra-size random checkpoint: loom calibrate on 16 jobs (2 frames), then
#                                 greedy runs (8 frames) with bf16 and fp8 KV: token agreement
#   scripts/fp8_check.sh bench    loom bench, 256 jobs x 22 frames: bf16 and fp8 KV (FRAMES, JOBS,
#                                 KVS override; PROFILE=1 adds --profile: the decode attention /
#                                 rest split; SHARED=8 adds groups of 8 jobs sharing context;
#                                 EXTRA adds loom bench options, TAG suffixes the file names;
#                                 HF=1 then times HF transformers eager on the same checkpoint,
#                                 HF_BATCH sequences (64, its best measured), 1 frame, under
#                                 HF_TIMEOUT seconds (240): issue 13's same-call comparison)
set -uo pipefail
what=${1:-att}
OUT=${OUT:-$PWD/out-fp8}
BUILD=${BUILD:-build}
B=$BUILD/bin
mkdir -p "$OUT"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee "$OUT/device.txt"
rc=0

if [ "$what" = att ]; then
  for c in "256 8000" "64 8000" "256 600" "1 14000"; do
    for k in bf16 fp8; do
      set -- $c
      "$B/cuda_bench" "$OUT/att_b$1_c$2_$k.json" --attention-case "$1" "$2" 4 "$k" || rc=1
    done
  done
fi

terra() {
  [ -d /tmp/terra ] || python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
}

if [ "$what" = terra ]; then
  terra
  # 16 greedy jobs: 3 context frames of random image ids, 8 frames (Terra: 576 + 6 slots);
  # the calibration set: 16 others of 2 frames.
  for set in "jobs 8 0" "calib 2 100"; do
  set -- $set
  python3 - "$OUT/$1.jsonl" "$2" "$3" <<'PY'
import json, random, sys
P, A, ctx, frames = 576, 6, 3, int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[3]), int(sys.argv[3]) + 16):
        r = random.Random(i)
        prompt = []
        for _ in range(ctx):
            prompt += [r.randrange(262144) for _ in range(P)] + [-3] * A
        acts = [[round(r.uniform(-1, 1), 3) for _ in range(3)] for _ in range(A * (ctx + frames))]
        f.write(json.dumps({"id": f"t{i}", "prompt_token_ids": prompt, "actions": acts,
                            "num_frames": frames, "sampling": {"temperature": 0.0}}) + "\n")
PY
  done
  "$B/loom" calibrate --model /tmp/terra --jobs "$OUT/calib.jsonl" --out "$OUT/scales.json" \
    2>&1 | tail -4 || rc=1
  for k in bf16 fp8; do
    extra=""
    [ $k = fp8 ] && extra="--kv-scales $OUT/scales.json"
    "$B/loom" run -q --model /tmp/terra --jobs "$OUT/jobs.jsonl" --out "$OUT/greedy_$k.jsonl" \
      --report "$OUT/greedy_$k.report.json" --kv-dtype $k $extra 2>&1 | tail -3 || rc=1
  done
  python3 - "$OUT" <<'PY' | tee "$OUT/agreement.txt"
import json, sys
o = sys.argv[1]
def frames(p):
    return {json.loads(l)["id"]: json.loads(l)["frames"] for l in open(p)}
a, b = frames(o + "/greedy_bf16.jsonl"), frames(o + "/greedy_fp8.jsonl")
tok = same = fr = fsame = lead = 0
for k in a:
    first_diff = None
    for i, (x, y) in enumerate(zip(a[k], b[k])):
        fr += 1
        fsame += x == y
        for t, (u, v) in enumerate(zip(x, y)):
            tok += 1
            same += u == v
            if u != v and first_diff is None:
                first_diff = i * len(x) + t
    lead += first_diff if first_diff is not None else len(a[k]) * len(a[k][0])
print(f"greedy fp8 vs bf16 KV, {len(a)} jobs x 8 frames: tokens equal {same}/{tok} "
      f"({100 * same / tok:.2f}%), frames equal {fsame}/{fr}, mean tokens before the first "
      f"difference {lead / len(a):.0f} of {8 * 576}")
PY
fi

if [ "$what" = bench ]; then
  terra
  F=${FRAMES:-22}
  J=${JOBS:-256}
  for k in ${KVS:-bf16 fp8}; do
    "$B/loom" bench --model /tmp/terra --kv-dtype $k --frames "$F" --context-frames 3 \
      --batch-sizes 1 --num-jobs "$J" ${PROFILE:+--profile} ${SHARED:+--shared-group $SHARED} \
      ${EXTRA:-} --json "$OUT/bench_$k${TAG:-}.json" 2>&1 | tee "$OUT/bench_$k${TAG:-}.log" |
      tail -8 || rc=1
  done
  if [ -n "${HF:-}" ]; then
    hb=${HF_BATCH:-64}
    timeout "${HF_TIMEOUT:-240}" python3 scripts/hf_bench.py --model /tmp/terra --mode eager \
      --batch "$hb" --frames 1 --json "$OUT/hf_eager_b$hb.json" 2>&1 | tail -3 || rc=1
  fi
fi
exit $rc
