#!/bin/bash
# Session 51, call 1 (~4 minutes): ctest -L cuda on the session's final host tree (255da93's code:
# outputs opened in the engine's on_start, --overwrite replaced there, mixed float dtypes
# converted at load, eos lists, read-ahead in 64 bits), then the CLI on the GPU: a dataset run,
# an --overwrite refused after the model loads (the old output must stay byte for byte), the
# --overwrite itself, and loom verify. Carry .device/s51.txz
# (`scripts/pack_device.sh tests build .device/s51.txz`).
python3 -c "import tarfile; tarfile.open('.device/s51.txz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee "$OUT/device.txt"
(cd build && timeout 400 ctest -L cuda --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest.log")
tail -5 "$OUT/ctest.log"
L=build/bin/loom
args="run -q --backend cuda -m testdata/tiny_v1 -i testdata/jobs/tiny_v1.jsonl -o $OUT/cli/r.jsonl --tokens-out $OUT/cli/ds --report $OUT/cli/rep.json --samples-per-file 2"
{
  $L $args; echo "first run rc=$?"
  (cd "$OUT/cli" && find . -type f | sort | xargs md5sum) > "$OUT/before.md5"
  $L $args --overwrite --kv-blocks 2147483647; echo "overwrite refused rc=$? (expected 2)"
  (cd "$OUT/cli" && find . -type f | sort | xargs md5sum) | diff "$OUT/before.md5" - && echo "old output unchanged"
  $L $args --overwrite; echo "overwrite rc=$?"
  $L verify "$OUT/cli/ds"; echo "verify rc=$?"
} > "$OUT/cli.log" 2>&1
cat "$OUT/cli.log"
