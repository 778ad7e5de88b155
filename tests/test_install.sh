#!/usr/bin/env bash
# One binary for every node (issue 14 §5), from the build folder ctest runs in:
#  - loom links no CUDA library (readelf; CUDA builds only, said so otherwise);
#  - `cmake --install` to a temporary prefix lays out bin/, lib/loom/, share/loom/models/ and
#    the README, and the installed loom run from another folder gives the build tree's tokens;
#  - the installed loom holds no source path and reads <prefix>/share/loom/models: a table that
#    exists only there is used;
#  - with the CUDA module removed from the prefix, inspect, merge and run --backend cpu/auto
#    succeed and --backend cuda says what is missing; a module that cannot load is named with
#    the loader's error;
#  - with the module in place, --backend cuda runs on a GPU machine (with the backend's KV block
#    size, 64, when --block-size is not given) and, elsewhere, says there is no driver.
#   tests/test_install.sh BUILD_DIR SOURCE_DIR HAVE_CUDA(ON|OFF)
set -euo pipefail
build=$1
src=$2
have_cuda=$3
for v in $(compgen -e | grep '^LOOM_' || true); do unset "$v"; done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
work=$tmp/work  # the cwd of every run: neither the source tree nor the build folder
mkdir -p "$work"
cd "$work"
model=$src/testdata/tiny_v1
jobs=$src/testdata/jobs/tiny_v1.jsonl

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# expect_error WHAT NEEDLE... -- CMD...: CMD fails and its stderr holds every NEEDLE.
expect_error() {
  local what=$1 needles=() err needle
  shift
  while [ "$1" != -- ]; do
    needles+=("$1")
    shift
  done
  shift
  if err=$("$@" 2>&1 >/dev/null); then fail "$what: succeeded"; fi
  for needle in "${needles[@]}"; do
    [[ $err == *"$needle"* ]] || fail "$what: stderr lacks '$needle': $err"
  done
  echo "ok: $what: $err"
}
# Records as (id, sample, status, frames), sorted: timings and order vary between runs.
tokens() {
  python3 -c 'import json, sys
records = map(json.loads, open(sys.argv[1]))
print(sorted((r["id"], r["sample"], r["status"], r.get("frames")) for r in records))' "$1"
}
cuda_libs() { readelf -d "$1" | grep NEEDED | grep -Ei 'cuda|cublas|nvrtc|nvjitlink' || true; }

# --- readelf: no CUDA library in loom
module_built=$build/bin/libloom-cuda.so
if [ "$have_cuda" = ON ]; then
  [ -f "$module_built" ] || fail "CUDA build without $module_built"
  linked=$(cuda_libs "$build/bin/loom")
  [ -z "$linked" ] || fail "bin/loom links CUDA: $linked"
  linked=$(cuda_libs "$module_built" | grep -o '\[.*\]' | tr '\n' ' ')
  [ -n "$linked" ] || fail "the module links no CUDA library (wrong file?)"
  echo "ok: bin/loom links no CUDA library; the module links $linked"
else
  echo "skipped: readelf check (this build has no CUDA backend, so nothing to keep out of loom)"
fi

# --- install to a prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/loom share/loom/models/llama_action.json share/doc/loom/README.md; do
  [ -f "$prefix/$f" ] || fail "install lacks $f"
done
module=$prefix/lib/loom/libloom-cuda.so
if [ "$have_cuda" = ON ]; then [ -f "$module" ] || fail "install lacks lib/loom/libloom-cuda.so"; fi
runpath=$(readelf -d "$prefix/bin/loom" | grep -E 'RUNPATH|RPATH' | grep -o '\[.*\]')
[ "$runpath" = '[$ORIGIN/../lib/loom:$ORIGIN]' ] || fail "installed loom's runpath is $runpath"
[ -z "$(cuda_libs "$prefix/bin/loom")" ] || fail "installed loom links CUDA"
! grep -qF "$src/" "$prefix/bin/loom" || fail "installed loom holds the source path $src"
loom=$prefix/bin/loom
echo "ok: installed to $prefix (runpath $runpath)"

# --- the installed loom from another folder: the build tree's tokens
"$build/bin/loom" run -q --backend cpu --model "$model" --jobs "$jobs" --out built.jsonl
"$loom" run -q --backend cpu --model "$model" --jobs "$jobs" --out installed.jsonl
[ "$(tokens built.jsonl)" = "$(tokens installed.jsonl)" ] || fail "installed tokens differ"
n=$(wc -l <built.jsonl)
[ "$n" -gt 0 ] && [ "$(grep -c '"status":"ok"' built.jsonl)" = "$n" ] ||
  fail "built: $n records, not all ok"
echo "ok: installed loom run from $work: the build tree's tokens"

# --- it reads <prefix>/share/loom/models: an architecture whose table exists only there
cp -r "$model" marked
sed -i 's/"LlamaActionForCausalLM"/"LoomInstallMarker"/' marked/config.json
sed 's/"LlamaActionForCausalLM"/"LoomInstallMarker"/' "$src/models/llama_action.json" \
  >"$prefix/share/loom/models/install_marker.json"
"$loom" inspect --model marked >inspect.txt
grep -q "^table .*$prefix/share/loom/models/install_marker.json" inspect.txt ||
  fail "installed loom did not use its prefix's table: $(grep '^table' inspect.txt)"
"$loom" run -q --backend cpu --model marked --jobs "$jobs" --out marked.jsonl
[ "$(tokens marked.jsonl)" = "$(tokens built.jsonl)" ] || fail "marked model's tokens differ"
expect_error "the build tree's loom does not know the marker" "LoomInstallMarker" -- \
  "$build/bin/loom" inspect --model marked
rm "$prefix/share/loom/models/install_marker.json"
echo "ok: installed loom reads $prefix/share/loom/models"

# --- with the module in place: cuda runs where a GPU is, and otherwise says why not
if [ "$have_cuda" = ON ]; then
  if nvidia-smi -L >/dev/null 2>&1; then
    "$loom" run -q --backend cuda --dtype f32 --model "$model" --jobs "$jobs" --out cuda.jsonl \
      --report cuda_report.json
    [ "$(grep -c '"status":"ok"' cuda.jsonl)" = "$n" ] || fail "cuda: not $n records ok"
    bs=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["kv_cache"]["block_size"])' \
      cuda_report.json)
    [ "$bs" = 64 ] || fail "cuda: KV block size $bs without --block-size, expected the backend's 64"
    echo "ok: installed loom runs --backend cuda"
    # A bf16 cache under f32 arithmetic changes tokens: resuming the f32-cache run with it is
    # refused (the identity records it since 0.6.1).
    expect_error "--resume with --kv-dtype bf16 under --dtype f32" \
      'was made with kv_dtype = "f32", this run has kv_dtype = "bf16"' -- \
      "$loom" run -q --backend cuda --dtype f32 --kv-dtype bf16 --model "$model" --jobs "$jobs" \
      --out cuda.jsonl --resume
  else
    expect_error "--backend cuda without a GPU" "NVIDIA driver" "--backend cpu" -- \
      "$loom" run -q --backend cuda --model "$model" --jobs "$jobs" --out cuda.jsonl
  fi
fi

# --- the module removed: a login node's copy
rm -f "$module"
"$loom" inspect --model "$model" >/dev/null
for k in 0 1; do
  "$loom" run -q --backend cpu --shard $k/2 --model "$model" --jobs "$jobs" --out sharded.jsonl
done
"$loom" merge --jobs "$jobs" --out merged.jsonl sharded.shard-0-of-2.jsonl \
  sharded.shard-1-of-2.jsonl
[ "$(tokens merged.jsonl)" = "$(tokens built.jsonl)" ] || fail "merged shards' tokens differ"
# --backend auto falls back to the cpu only where no NVIDIA GPU is in view (app/setup.cpp's
# nvidia_gpu_seen: a display/3D controller of vendor 0x10de on the PCI bus, or /dev/nvidia0);
# beside a GPU, a loom without its module is an error, not a silent run on the cpu.
gpu_seen=
for dev in /sys/bus/pci/devices/*; do
  [ "$(cat "$dev/vendor" 2>/dev/null)" = 0x10de ] || continue
  case "$(cat "$dev/class" 2>/dev/null)" in 0x0300* | 0x0302*) gpu_seen=1 ;; esac
done
[ -e /dev/nvidia0 ] && gpu_seen=1
if [ -z "$gpu_seen" ]; then
  "$loom" run -q --backend auto --model "$model" --jobs "$jobs" --out auto.jsonl
  [ "$(tokens auto.jsonl)" = "$(tokens built.jsonl)" ] || fail "--backend auto's tokens differ"
else
  expect_error "--backend auto beside a GPU without the module" "no CUDA module" \
    "$prefix/lib/loom/libloom-cuda.so" "--backend cpu" -- \
    "$loom" run -q --backend auto --model "$model" --jobs "$jobs" --out auto.jsonl
fi
echo "ok: without the module: inspect, run --backend cpu (2 shards), merge, run --backend auto"
expect_error "--backend cuda without the module" "$prefix/bin/libloom-cuda.so" \
  "$prefix/lib/loom/libloom-cuda.so" "--backend cpu" -- \
  "$loom" run -q --backend cuda --model "$model" --jobs "$jobs" --out cuda.jsonl

# --- a module that cannot load: its path and the loader's error
head -c 4096 /dev/zero >"$module"  # not an ELF file
expect_error "--backend cuda with a broken module" \
  "cannot load the CUDA module $module: $module: invalid ELF header" "--backend cpu" -- \
  "$loom" run -q --backend cuda --model "$model" --jobs "$jobs" --out cuda.jsonl
echo "PASS"
