#!/usr/bin/env bash
# Installs what loom needs on a Debian 12 machine, and nothing it already has.
#   scripts/setup.sh           compilers and the C++ libraries (CLI11, nlohmann/json, simdjson,
#                              doctest) from Debian's packages
#   scripts/setup.sh --python  also Python for the HF reference: python3-torch from apt plus a
#                              venv in build/pyenv with transformers==4.39.3 and safetensors
# CUDA (nvcc, cuBLAS) is used from /usr/local/cuda when present; it is never downloaded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
want_python=0
[ "${1:-}" = "--python" ] && want_python=1

pkgs=(g++ cmake make libcli11-dev nlohmann-json3-dev libsimdjson-dev doctest-dev)
[ $want_python = 1 ] && pkgs+=(python3 python3-venv python3-pip python3-numpy python3-torch python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

if [ $want_python = 1 ]; then
  venv="$root/build/pyenv"
  if ! "$venv/bin/python" -c "import transformers, safetensors, torch, numpy; assert transformers.__version__ == '4.39.3'" 2>/dev/null; then
    echo "setup: making $venv (transformers==4.39.3, safetensors)" >&2
    mkdir -p "$root/build"
    /usr/bin/python3 -m venv --system-site-packages "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check "transformers==4.39.3" safetensors >&2
  fi
fi
