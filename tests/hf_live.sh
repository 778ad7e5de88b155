#!/usr/bin/env bash
# Live HF check: draw a new random tiny checkpoint of each kind (v1, V2, plain Llama) with a
# seed from the clock, write goldens with the real transformers model, and run the cpu golden
# test on them. Fails (never skips) when Python or transformers is missing.
set -euo pipefail
python=$1
build=$2
root=$(cd "$(dirname "$0")/.." && pwd)
if ! "$python" -c "import transformers, torch, safetensors" 2>/dev/null; then
  echo "hf_live: $python lacks torch/transformers/safetensors; run scripts/setup.sh --python" >&2
  exit 1
fi
seed=${LOOM_HF_SEED:-$(( $(date +%s) % 100000 ))}
dirs=()
for kind in v1 v2 llama; do
  d="$build/hf_live/$kind"
  dtype=f32
  [ $kind = v1 ] && dtype=bf16
  # hf_reference.py refuses a checkpoint whose sampled draws are decided by less than 1e-3
  # (a tie the two implementations could break differently); draw another one then.
  ok=0
  for try in 0 1 2 3 4 5 6 7; do
    s=$((seed + 1000 * try + ${#dirs[@]}))
    rm -rf "$d"
    if "$python" "$root/scripts/hf_reference.py" make --kind $kind --seed $s --dtype $dtype \
        --out "$d" >"$build/hf_live.$kind.log" 2>&1; then
      ok=1
      break
    fi
  done
  if [ $ok = 0 ]; then
    cat "$build/hf_live.$kind.log" >&2
    exit 1
  fi
  echo "hf_live: $kind checkpoint from seed $s in $d"
  dirs+=("$d")
done
LOOM_GOLDEN_DIRS=$(IFS=:; echo "${dirs[*]}") "$build/bin/test_golden" \
  --test-case="cpu backend reproduces the HF golden logits and tokens"
