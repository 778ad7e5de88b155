#!/bin/bash
# Session 64, call 3: branch walk-ring (d12e44d, .device/w1.txz, a tests pack) against main
# a34acb9 (.device/m64.txz): main's partition with session 64's ring walk (a walking unit's next
# K/V staged into the ring at 4-8 slots). The change's cuda_test_megakernel, base / change
# alternated twice (steps table; the change's attn_walk_ring off / on at batch 8, ctx 3,000 and
# 7,000), then the change's ctest -L cuda and compute-sanitizer memcheck and synccheck on the
# megakernel's bf16 comparisons. Predicted: b8 ctx 7,000 2,691 -> ~2,590 us, ctx 600 and b1
# unchanged.
set -u
bash scripts/mega_ab.sh .device/w1.txz .device/m64.txz attn_walk_ring_3000,attn_walk_ring_7000
python3 - "$OUT" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/*_[12].json")):
    d = json.load(open(f))
    print(f.split("/")[-1], {k: [round(r["graph_gpu_s"] * 1e6, 1) for r in v]
                             for k, v in d.items() if k.startswith("attn_walk")})
PY
mkdir -p /tmp/o && tar -czf "$OUT/ab_json.tgz" -C "$OUT" base_1.json base_2.json new_1.json new_2.json &&
  rm "$OUT"/base_?.json "$OUT"/new_?.json
(cd build && timeout 300 ctest -L cuda --output-on-failure) > "$OUT/ctest_cuda.log" 2>&1
echo "ctest rc=$?"; tail -4 "$OUT/ctest_cuda.log"
OUT=/tmp/o SANITIZE_TOOLS="memcheck synccheck" timeout 250 bash scripts/mega_check.sh sanitize > /dev/null 2>&1
echo "sanitize rc=$?"; tail -3 /tmp/o/sanitize_memcheck.log /tmp/o/sanitize_synccheck.log | tee "$OUT/sanitize.txt"
