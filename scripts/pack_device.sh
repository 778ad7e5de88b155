#!/usr/bin/env bash
# Packs what the device machine needs from a build folder (it has no Debian packages, and the
# whole folder is over the device tool's 64 MiB): loom, its CUDA module, libsimdjson, the
# mapping tables and cuda_bench; with `tests` also the CUDA test suites and ctest's files.
# Writes .device/carry.txz, xz-compressed with one 256 MiB dictionary (one thread, under 2
# minutes here): the test binaries each hold the same CUDA kernels, which a dictionary that
# spans them stores once (the tests pack is ~7 MB, against ~41 MB with `xz -3` and its 4 MiB
# windows). Name it in the device call's carry and unpack it there with python3 (the machine may lack xz), which recreates BUILD/:
#   python3 -c "import tarfile; tarfile.open('.device/carry.txz').extractall()"
#   scripts/pack_device.sh [tests|run] [BUILD] [OUT.txz]   (default: tests build .device/carry.txz)
# A baseline for side-by-side runs: pack another build as .device/base.txz with `run`.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-tests}
b=${2:-build}
out=${3:-.device/carry.txz}
files=("$b"/bin/loom "$b"/bin/libloom-cuda.so "$b"/bin/libsimdjson.so.* "$b"/bin/models)
[ -e "$b"/bin/cuda_bench ] && files+=("$b"/bin/cuda_bench)
[ "$what" = tests ] && files+=("$b"/bin/cuda_test_* "$b"/CTestTestfile.cmake "$b"/cmake_install.cmake)
mkdir -p "$(dirname "$out")"
tar -cf - "${files[@]}" | xz -T1 --lzma2=preset=6,dict=256MiB > "$out"
du -sh "$out"
