#!/usr/bin/env python3
# Batch 4-16's decode-attention timeline from the probe's records
# (bench/experiments/2026-12-03-probe-tma-timeline.patch): PREFIX.attention_tma (one record a
# TMA warp: stamps 0 entry, 1 after the wait, 5 first tile in, 6 chain's end, 2 before the count,
# 3 counted, 4 done) and PREFIX.gemv_mma / PREFIX.gemv (one a GEMV block: 0 entry, 1 after the
# wait, 2 staged, 3 done; tag n * 4 + input mode). Prints, per attention launch of the last
# LAUNCHES, then as medians (us): qkv's last block done -> the first warp past its wait, the
# warps' wait spread, first tile in after the wait, the chain, the count's round trip, the fold,
# the attention's last warp -> o's first block past its wait, and qkv's end -> o's wait.
# Session 39's fold probe (2026-12-03-probe-tma-fold.patch) adds one record a last chunk, tag
# bit 26: stamps counted, fenced, round 1 issued, round 1 in, merged, written, end; its rows
# "fold: ..." split the fold into those steps.
#   python3 2026-12-03-probe-tma-timeline.py PREFIX [LAUNCHES]
import statistics as st
import sys
from collections import defaultdict

prefix, last_n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 220


def records(name):
    out = []
    try:
        with open(f"{prefix}.{name}") as f:
            for line in f:
                if line.startswith("#"):
                    continue
                v = line.split()
                out.append((int(v[1], 16), int(v[2]), int(v[3]), [int(x) for x in v[5:12]]))
    except FileNotFoundError:
        pass
    return out


def launches(recs, gap_ns=100_000):  # records of one key, split where the entries jump
    by_key = defaultdict(list)
    for key, tag, block, t in recs:
        by_key[key].append((tag, block, t))
    out = []
    for key, rs in by_key.items():
        rs.sort(key=lambda r: r[2][0])
        cur = [rs[0]]
        for r in rs[1:]:
            if r[2][0] - cur[-1][2][0] > gap_ns:
                out.append(cur)
                cur = []
            cur.append(r)
        out.append(cur)
    return sorted(out, key=lambda l: min(r[2][0] for r in l))


all_attn = records("attention_tma")
folds = [r for r in all_attn if (r[1] >> 26) & 1]
attn = launches([r for r in all_attn if not (r[1] >> 26) & 1])
gemv = launches(records("gemv_mma") + records("gemv"))
qkv = [l for l in gemv if l[0][0] // 4 in (2560,)]
o_proj = [l for l in gemv if l[0][0] // 4 == 2048 and l[0][0] % 4 == 0]
rows = []
for l in attn[-last_n:]:
    t0 = min(r[2][0] for r in l)
    w_min = min(r[2][1] for r in l)
    w_max = max(r[2][1] for r in l)
    end = max(r[2][4] for r in l)
    q_end = max((max(r[2][3] for r in q) for q in qkv if max(r[2][3] for r in q) <= w_min),
                default=None)
    o_next = [o for o in o_proj if min(r[2][0] for r in o) >= t0]
    o_wait = min(r[2][1] for r in o_next[0]) if o_next else None
    lasts = [r for r in l if (r[0] >> 24) & 1]
    us = lambda x: x / 1000.0
    rows.append({
        "qkv end -> wait": us(w_min - q_end) if q_end else float("nan"),
        "wait spread": us(w_max - w_min),
        "first tile": us(st.median(r[2][5] - r[2][1] for r in l)),
        "chain": us(st.median(r[2][6] - r[2][5] for r in l)),
        "chain max": us(max(r[2][6] - r[2][5] for r in l)),
        "count": us(st.median(r[2][3] - r[2][2] for r in l)),
        "fold": us(st.median(r[2][4] - r[2][3] for r in lasts)) if lasts else 0.0,
        "end -> o wait": us(o_wait - end) if o_wait else float("nan"),
        "qkv end -> o wait": us(o_wait - q_end) if (o_wait and q_end) else float("nan"),
        "warps": len(l),
    })
keys = list(rows[0].keys()) if rows else []
print("attention launches:", len(attn), "of which summarised:", len(rows))
for k in keys:
    vals = [r[k] for r in rows if r[k] == r[k]]
    if vals:
        print(f"{k:>20}: median {st.median(vals):8.2f}  min {min(vals):8.2f}  max {max(vals):8.2f}")
fold_steps = ["fence", "issue round 1", "round 1 in", "merges", "writes", "end"]
folds = sorted(folds, key=lambda r: r[3][0])[-last_n * 40:]
if folds:
    print("fold records:", len(folds), "partitions (median):", st.median(r[1] & 0xFF for r in folds))
for i, name in enumerate(fold_steps):
    d = [(r[3][i + 1] - r[3][i]) / 1000.0 for r in folds if r[3][i + 1] and r[3][i]]
    if d:
        print(f"{'fold: ' + name:>20}: median {st.median(d):8.2f}  min {min(d):8.2f}  max {max(d):8.2f}")
