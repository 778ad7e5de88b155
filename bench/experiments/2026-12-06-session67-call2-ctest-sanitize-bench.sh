#!/bin/bash
# Session 67, call 2: main with the writer-side proxy fences and the shared K/V stager / score tile
# (.device/m67b.txz, a tests pack of 0681e37's kernels): scripts/mega_check.sh's tests
# (cuda_test_megakernel, ctest -L cuda), its sanitizers memcheck and synccheck on the megakernel's
# bf16 comparisons with the graph path (the 4-8 slot paths the two changes touch), and its bench
# (loom bench batch 1 and 8 on the graph path and with --megakernel, Terra-size v1).
set -u
python3 -c "import tarfile; tarfile.open('.device/m67b.txz').extractall()"
top=$OUT
export OUT=$top/c2
for what in tests sanitize bench; do
  SANITIZE_TOOLS="memcheck synccheck" SANITIZE_CASES="bf16 megakernel near the graph path*" \
    bash scripts/mega_check.sh $what > "$top/$what.txt" 2>&1
  echo "$what rc=$? at ${SECONDS}s"; tail -n 12 "$top/$what.txt"
done
tar -czf "$top/c2.tgz" -C "$top" c2 && rm -r "$top/c2"
