#!/bin/bash
# Session 66, calls 1 and 2 in one (the device's starts kept failing; the budget allows one or
# two more calls): main 43867df's cuda_test_megakernel (the review's multi-partition group
# settings, never run on a GPU), then the A/B of branch relaxed-polls (.device/rp.txz: the
# waits without acquire, call 2's script says why) and, if the time allows, of branch
# attn-groups-8b (.device/g8b.txz: call 1's script), each against main (.device/m66.txz) with
# scripts/mega_ab.sh into its own folder, tarred (at most 8 files come back).
set -u
mkdir -p m && (cd m && python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" ../.device/m66.txz)
. scripts/device_env.sh
(cd m && timeout 200 build/bin/cuda_test_megakernel > "$OUT/test_main.log" 2>&1; echo "main test rc=$?")
grep -E "ERROR|assertions|Status" "$OUT/test_main.log" | head -5
top=$OUT
for v in rp g8b; do
  [ $SECONDS -gt 330 ] && { echo "skip $v: ${SECONDS}s used"; continue; }
  mkdir -p "$top/$v"
  echo "=== $v at ${SECONDS}s"
  OUT=$top/$v bash scripts/mega_ab.sh .device/$v.txz .device/m66.txz none
  tar -czf "$top/$v.tgz" -C "$top" "$v" && rm -r "${top:?}/$v"
done
echo "done at ${SECONDS}s"
