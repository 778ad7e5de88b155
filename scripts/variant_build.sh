#!/usr/bin/env bash
# Builds one set of binaries a variant for a side-by-side device call: each NAME=PATCH applies
# PATCH (git apply) to the clean tree, builds TARGETS in BUILD, copies them (with libsimdjson,
# and with loom also libloom-cuda.so and the mapping tables) to .device/NAME/bin and reverts the
# patch; NAME=main takes the tree as it is. Then packs this run's sets into OUT (default
# .device/variants.txz) for the device call's carry (unpack there with python3's tarfile, as
# pack_device.sh's packs).
#   scripts/variant_build.sh [-t "cuda_bench cuda_test_attention_shared loom"] [-o OUT.txz]
#                            NAME=PATCH|main ...
# BUILD (default build) must be configured. The tracked tree must be clean: a patch that does not
# apply, or a failed build, stops the script with the tree reverted.
set -euo pipefail
cd "$(dirname "$0")/.."
targets="cuda_bench"
pack=.device/variants.txz
while [ "${1:-}" = -t ] || [ "${1:-}" = -o ]; do
  if [ "$1" = -t ]; then targets=$2; else pack=$2; fi
  shift 2
done
[ $# -gt 0 ] || { echo "usage: $0 [-t TARGETS] [-o OUT.txz] NAME=PATCH|main ..." >&2; exit 2; }
b=${BUILD:-build}
git diff --quiet HEAD -- || { echo "variant_build: the tracked tree has changes; commit or stash them" >&2; exit 2; }
make_targets=()
for t in $targets; do
  [ "$t" = loom ] && make_targets+=(loom loom_cuda_backend) || make_targets+=("$t")
done
names=()
for spec in "$@"; do
  name=${spec%%=*}
  patch=${spec#*=}
  [ "$name" != "$spec" ] && [ -n "$name" ] || { echo "variant_build: '$spec' is not NAME=PATCH" >&2; exit 2; }
  if [ "$patch" != main ]; then
    git apply --check "$patch" || { echo "variant_build: $patch does not apply to HEAD" >&2; exit 1; }
    git apply "$patch"
    trap 'git apply -R "$patch"' EXIT
  fi
  # Applying and reverting set the files' times to now, so make rebuilds what a patch touches.
  make -C "$b" -j"$(nproc)" "${make_targets[@]}" > /dev/null
  out=.device/$name/bin
  rm -rf ".device/$name"
  mkdir -p "$out"
  for t in $targets; do cp "$b/bin/$t" "$out/"; done
  cp "$b"/bin/libsimdjson.so.* "$out/"
  case " $targets " in *" loom "*) cp -r "$b/bin/libloom-cuda.so" "$b/bin/models" "$out/" ;; esac
  if [ "$patch" != main ]; then
    git apply -R "$patch"
    trap - EXIT
  fi
  echo "variant_build: $name ($patch): $(ls "$out" | tr '\n' ' ')"
  names+=(".device/$name")
done
make -C "$b" -j"$(nproc)" "${make_targets[@]}" > /dev/null  # the build back at HEAD
tar -cf - "${names[@]}" | xz -T1 --lzma2=preset=6,dict=256MiB > "$pack"  # (pack_device.sh)
du -sh "$pack"
