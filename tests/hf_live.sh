#!/usr/bin/env bash
# Live HF check: draw a new random tiny checkpoint of every family loom has a table for, with a
# seed from the clock, write goldens with the real transformers model, and run the cpu golden
# tests on them (logits within 1e-4, tokens identical):
#   v1, V2, plain Llama       scripts/hf_reference.py make
#   OPT, GPT-2, action tokens scripts/hf_families.py make
#   Meta-named Llama          scripts/convert_meta.py from-hf of the fresh Llama, which must
#                             give that Llama's HF tokens and logits
# Fails (never skips) when Python or transformers is missing. LOOM_HF_SEED=N repeats a run.
# Works in a folder of its own (several checkouts' ctest may run at once), removed on success
# and kept, with the makers' logs, on failure.
set -euo pipefail
python=$1
build=$2
root=$(cd "$(dirname "$0")/.." && pwd)
if ! "$python" -c "import transformers, torch, safetensors" 2>/dev/null; then
  echo "hf_live: $python lacks torch/transformers/safetensors; run scripts/setup.sh --python" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/loom_hf_live.XXXXXX")
keep() { echo "hf_live: failed; checkpoints and logs kept in $work" >&2; }
trap keep ERR
seed=${LOOM_HF_SEED:-$(( $(date +%s) % 100000 ))}
echo "hf_live: seed $seed (LOOM_HF_SEED=$seed repeats this run)"
dirs=()
# kind:script:dtype (hf_families.py writes f32 only)
for spec in v1:hf_reference:bf16 v2:hf_reference:f32 llama:hf_reference:f32 \
  opt:hf_families:f32 gpt2:hf_families:f32 action_tokens:hf_families:f32; do
  IFS=: read -r kind script dtype <<<"$spec"
  d="$work/$kind"
  args=()
  [ "$script" = hf_reference ] && args=(--dtype "$dtype")
  # Both makers refuse a checkpoint whose sampled draws are decided by less than 1e-3, or whose
  # ids' order (neighbours' z gaps, top-p's cut) by less than 1e-4 (a tie the two
  # implementations could break differently); draw another one then. About 1 in 3 random
  # checkpoints passes (v2: 5 of 16 seeds; action_tokens 26 of 58 with both bounds, 32 of 58
  # with the first alone), so 8 tries failed ~5% of runs a family (LOOM_HF_SEED=84151: v2
  # refused 8 times); 32 leave ~1e-5. (LOOM_HF_SEED=25328 failed before the order bound: two
  # kept ids 3.2e-6 apart in z swapped places.)
  ok=0
  for try in $(seq 0 31); do
    s=$((seed + 1000 * try + ${#dirs[@]}))
    rm -rf "$d"
    if "$python" "$root/scripts/$script.py" make --kind "$kind" --seed $s "${args[@]}" \
        --out "$d" >"$work/$kind.log" 2>&1; then
      ok=1
      break
    fi
  done
  if [ $ok = 0 ]; then
    cat "$work/$kind.log" >&2
    keep
    exit 1
  fi
  echo "hf_live: $kind checkpoint from seed $s in $d"
  dirs+=("$d")
done
"$python" "$root/scripts/convert_meta.py" from-hf --hf "$work/llama" --out "$work/llama_meta" \
  >"$work/llama_meta.log" 2>&1 || { cat "$work/llama_meta.log" >&2; keep; exit 1; }
echo "hf_live: Meta-named copy of the llama checkpoint in $work/llama_meta"
# The same checkpoint split in two shards with an index (as the Hub stores larger models):
# from-hf must give the same tensors.
"$python" - "$work/llama" "$work/llama_sharded" <<'PY' || { keep; exit 1; }
import json, os, shutil, sys
from safetensors.torch import load_file, save_file
src, dst = sys.argv[1:]
os.makedirs(dst)
shutil.copy(os.path.join(src, "config.json"), dst)
t = load_file(os.path.join(src, "model.safetensors"))
names = sorted(t)
shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
for f, ns in shards.items():
    save_file({n: t[n] for n in ns}, os.path.join(dst, f))
with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
    json.dump({"weight_map": {n: f_ for f_, ns in shards.items() for n in ns}}, f)
PY
"$python" "$root/scripts/convert_meta.py" from-hf --hf "$work/llama_sharded" \
  --out "$work/llama_meta_sharded" >"$work/llama_meta.log" 2>&1 ||
  { cat "$work/llama_meta.log" >&2; keep; exit 1; }
"$python" - "$work/llama_meta" "$work/llama_meta_sharded" <<'PY' || { keep; exit 1; }
import sys
from safetensors.torch import load_file
a, b = (load_file(d + "/model.safetensors") for d in sys.argv[1:])
assert sorted(a) == sorted(b), "tensor names differ"
bad = [n for n in a if not a[n].equal(b[n])]
assert not bad, "from-hf of the sharded copy differs at %s" % bad[:3]
print("hf_live: from-hf of the sharded copy gives the same %d tensors" % len(a))
PY
cmp "$work/llama_meta/params.json" "$work/llama_meta_sharded/params.json"
LOOM_GOLDEN_DIRS=$(IFS=:; echo "${dirs[*]}") "$build/bin/test_golden" \
  --test-case="cpu backend reproduces the HF golden logits and tokens"
LOOM_META_HF_DIR="$work/llama" "$build/bin/test_golden" \
  --test-case="a Meta-named copy of tiny_llama*"
trap - ERR
rm -rf "$work"
