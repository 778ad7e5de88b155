#!/bin/sh
# The ctest entry (tests/scripts.cmake): `PYTHON -m unittest discover` on this folder, with
# LOOM_BIN and PYTHONPATH set by ctest. Skipped (exit 77) where PYTHON lacks numpy or
# safetensors; scripts/setup.sh --python makes a Python that has them.
python=$1
if ! "$python" -c "import numpy, safetensors" 2>/dev/null; then
  echo "SKIPPED: $python lacks numpy or safetensors (scripts/setup.sh --python)"
  exit 77
fi
exec "$python" -m unittest discover -v -s "$(dirname "$0")"
