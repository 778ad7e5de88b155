#!/usr/bin/env python3
"""Session 35: block start / wait / end stamps of each kernel of a layer against the previous
kernel's last end (medians over the last complete steps), from a partition-probe dump
(bench/experiments/2026-12-03-probe-timeline-partition-stamps-s35.patch). Reuses the reader
2026-12-02-probe-timeline-partition.py's parsing.
  probe-block-starts.py probe_b1.gemv.gz probe_b1.attention.gz"""
import gzip, statistics, sys
from collections import defaultdict
exec(open('bench/experiments/2026-12-02-probe-timeline-partition.py').read().split("ph = defaultdict(list)")[0].replace("sys.argv[1:]", "[sys.argv[1], sys.argv[2]]"))
idx = [i for i, d in enumerate(L) if d["kind"] == "lm_head"]
stats = defaultdict(list)
for a, b in zip(idx, idx[1:]):
    seq = L[a + 1 : b + 1]
    kinds = [d["kind"] for d in seq]
    if kinds[:-1] != ["qkv", "attn", "o", "gate_up", "down"] * 22: continue
    prev = L[a]
    for d in seq[:-1]:
        pe = prev["e1"]
        rs = d["recs"]
        n = len(rs)
        starts = sorted(r[5] - pe for r in rs)
        waits = sorted(r[6] - pe for r in rs)
        ends = sorted(r[8] - pe for r in rs)
        k = d["kind"]
        stats[k, "n"].append(n)
        stats[k, "started before prev end"].append(sum(s < 0 for s in starts))
        stats[k, "first wait"].append(waits[0] / 1e3)
        stats[k, "median wait"].append(waits[n // 2] / 1e3)
        stats[k, "last wait"].append(waits[-1] / 1e3)
        stats[k, "last start"].append(starts[-1] / 1e3)
        stats[k, "first end"].append(ends[0] / 1e3)
        stats[k, "median end"].append(ends[n // 2] / 1e3)
        stats[k, "last end"].append(ends[-1] / 1e3)
        if k != "attn":
            # blocks by index: early (< 44) vs late ends
            lo = [r[8] - pe for r in rs if r[3] < 44]; hi = [r[8] - pe for r in rs if r[3] >= 44]
            if lo and hi:
                stats[k, "end blocks<44 median"].append(statistics.median(lo) / 1e3)
                stats[k, "end blocks>=44 median"].append(statistics.median(hi) / 1e3)
        prev = d
for key in sorted(stats, key=lambda k: (["qkv","attn","o","gate_up","down"].index(k[0]), k[1])):
    v = stats[key]
    print(f"{key[0]:8s} {key[1]:28s} median {statistics.median(v):9.2f}")
