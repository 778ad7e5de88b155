#!/bin/bash
# Prepared in session 52 for session 53 (~3 minutes): the megakernel against today's graph step,
# op by op, before any work on issue 15's persistent step kernel. `scripts/mega_check.sh trace`
# (cuda_bench --megakernel: both paths at batch 1 ctx 600, the megakernel's per-op trace and
# rows-per-unit sweep) and the graph step's split at batch 1 (call 2 of session 52 measured it:
# 1.118 ms, layer GEMVs 0.719, attention 0.155, lm_head + draw 0.269). Question: which of the
# megakernel's ops lose to the graph path's kernels, and by how much (session 12's trace:
# GateUp and Down spans ~18 and ~11 us a layer against the graphs' ~14 and ~8.6 now). Carry a
# tests pack of main (`scripts/pack_device.sh tests build .device/s53.txz`).
python3 -c "import tarfile; tarfile.open('.device/s53.txz').extractall()"
W=/tmp/s53_mega; rm -rf "$W"; mkdir -p "$W"
OUT_SAVE=$OUT
OUT=$W timeout 240 scripts/mega_check.sh trace > "$W/trace.log" 2>&1
echo "trace rc=$?"; tail -40 "$W/trace.log"
. scripts/device_env.sh
timeout 100 build/bin/cuda_bench "$W/step_b1.json" --step-case 1 600 > "$W/step_b1.log" 2>&1
echo "step rc=$?"; grep -E "nothing|without attention|layer GEMMs|lm_head" "$W/step_b1.log"
tar czf "$OUT_SAVE/s53_mega.tgz" -C "$W" .
