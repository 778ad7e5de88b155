#!/usr/bin/env bash
# Packs what the device machine needs from a build folder (it has no Debian packages, and the
# whole folder is over the device tool's 64 MiB): loom, its CUDA module, libsimdjson, the
# mapping tables and cuda_bench; with `tests` also the CUDA test suites and ctest's files.
# Writes .device/carry.tgz (name it in the device call's carry; unpack there with
# `tar -xzf .device/carry.tgz`, which recreates BUILD/).
#   scripts/pack_device.sh [tests|run] [BUILD] [OUT.tgz]   (default: tests build .device/carry.tgz)
# A baseline for side-by-side runs: pack another build as .device/base.tgz with `run`.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-tests}
b=${2:-build}
out=${3:-.device/carry.tgz}
files=("$b"/bin/loom "$b"/bin/libloom-cuda.so "$b"/bin/libsimdjson.so.* "$b"/bin/models)
[ -e "$b"/bin/cuda_bench ] && files+=("$b"/bin/cuda_bench)
[ "$what" = tests ] && files+=("$b"/bin/cuda_test_* "$b"/CTestTestfile.cmake "$b"/cmake_install.cmake)
mkdir -p "$(dirname "$out")"
tar -czf "$out" "${files[@]}"
du -sh "$out"
