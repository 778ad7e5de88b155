#!/bin/bash
# Session 64, call 2: branch attn-flash against main a34acb9 (.device/m64.txz): AttnPartial's
# bf16 partition with a warp per 16 keys, its scores, softmax and P·V in registers, three
# barriers a partition instead of five, and at 4-8 slots a walking unit's next K/V staged into
# the ring (attn_walk_ring) — f2 (.device/f2.txz, f0bcc6e) — and f3 (.device/f3.txz): f2 with
# the fold's factors e^(m_w - M) computed once a (warp, head) behind one more barrier (the same
# bits as f2). f3's cuda_test_megakernel, then base / f2 / f3 alternated twice (steps table:
# batch 1 and 8 at ctx 600 and 7,000; batch 2's attn_apart rows; f2 and f3's attn_walk_ring off /
# on at batch 8, ctx 3,000 and 7,000), then f3's per-op traces at batch 8 ctx 7,000 and batch 1
# ctx 600. Predicted: b8 ctx 7,000 2,700 -> ~2,350 us; ctx 600 -1..-3%; b1 -1%.
set -u
for v in f2 f3; do mkdir -p $v && (cd $v && python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" ../.device/$v.txz); done
mkdir -p base && (cd base && python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall()" ../.device/m64.txz)
mkdir -p /tmp/j
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 240 f3/build/bin/cuda_test_megakernel > "$OUT/test.log" 2>&1
echo "test rc=$?"; grep -E "ERROR|error|assertions|Status" "$OUT/test.log" | head
sw=attn_apart_b2,attn_apart_b2_7000,attn_walk_ring_3000,attn_walk_ring_7000
for r in 1 2; do
  for v in base f2 f3; do
    echo "== $v round $r" >> "$OUT/all.log"
    LOOM_BENCH_MEGA_SWEEPS=$sw timeout 110 $v/build/bin/cuda_bench "/tmp/j/${v}_$r.json" --megakernel >> "$OUT/all.log" 2>&1
    echo "== $v round $r rc=$?"
    grep -A14 "== $v round $r" "$OUT/all.log" | grep -E "^(1|8) .*mega"
  done
done
python3 - /tmp/j <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/*_[12].json")):
    d = json.load(open(f))
    print(f.split("/")[-1], {k: [round(r["graph_gpu_s"] * 1e6, 1) for r in v]
                             for k, v in d.items() if k.startswith("attn_apart_b2") or k.startswith("attn_walk")})
PY
LOOM_BENCH_MEGA_SWEEPS=none LOOM_BENCH_MEGA_TRACE="8,7000,0;1,600,0" timeout 100 \
  f3/build/bin/cuda_bench /tmp/trace.json --megakernel > "$OUT/trace.log" 2>&1
echo "trace rc=$?"; grep -A12 "^megakernel batch" "$OUT/trace.log" | grep -E "batch|attn_partial|qkv|o_proj"
tar -czf "$OUT/json.tgz" -C /tmp/j .
