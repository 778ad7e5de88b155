#!/usr/bin/env python3
"""Session 33's reader for the partition probe (bench/experiments/2026-12-02-probe-timeline-partition-stamps.patch:
seven stamps a record; each attention block's warp 0 stamps t5 when its first tile is in shared
memory and t6 when the tile's scores, P and P V are done), else as 2026-12-02-probe-timeline-fold.py. Reads a probe dump (bench/experiments/2026-12-02-probe-step-timeline-gemv-attention.patch:
one record a block: key, tag, block, SM, t0 start, t1 after the PDL wait, t2 after the staging
(GEMV) or the partition loop (attention), t3 end; ns; the probe on the staged fold adds the
attention block's count before the end) and prints per-layer phases of the last
complete decode steps, medians over layers and steps (us).
  probe-timeline.py probe_b1.gemv.gz probe_b1.attention.gz [probe_b1.gemv_mma.gz]
(the files of one run: each kernel file keeps its own ring of records)"""
import gzip, statistics, sys
from collections import defaultdict

recs = []
for path in sys.argv[1:]:
    for line in gzip.open(path, "rt"):
        if line.startswith("#"):
            continue
        f = line.split()  # i key tag block sm t0 t1 t2 t3 t4 t5 t6
        i, key, tag, block, sm, t0, t1, t2, t3, t4, t5, t6 = f
        recs.append((int(i), key, int(tag), int(block), int(sm), int(t0), int(t1), int(t2),
                     int(t4), int(t3), int(t5), int(t6)))

# Launches: a key's blocks whose post-wait stamps lie within 100 us of each other.
by_key = defaultdict(list)
for r in recs:
    by_key[r[1]].append(r)
launches = []
for key, rs in by_key.items():
    rs.sort(key=lambda r: r[6])
    cur = [rs[0]]
    for r in rs[1:]:
        if r[6] - cur[-1][6] > 100_000:
            launches.append(cur)
            cur = []
        cur.append(r)
    launches.append(cur)


def kind(tag):
    return {10241: "qkv", 8192: "o", 45057: "gate_up", 8194: "down"}.get(tag, "lm_head" if tag > 100000 else "attn")


L = []
for rs in launches:
    L.append(dict(kind=kind(rs[0][2]), tag=rs[0][2], n=len(rs), t0=min(r[5] for r in rs),
                  w0=min(r[6] for r in rs), w1=max(r[6] for r in rs), s1=max(r[7] for r in rs),
                  e1=max(r[8] for r in rs), e0=min(r[8] for r in rs), c1=max(r[9] for r in rs),
                  last=max(rs, key=lambda r: r[8]), recs=rs))
L.sort(key=lambda d: d["w0"])
# Steps: from one lm_head to the next; keep the complete ones.
idx = [i for i, d in enumerate(L) if d["kind"] == "lm_head"]
ph = defaultdict(list)
steps = 0
for a, b in zip(idx, idx[1:]):
    seq = L[a + 1 : b + 1]
    kinds = [d["kind"] for d in seq]
    if kinds[:-1] != ["qkv", "attn", "o", "gate_up", "down"] * 22:
        continue
    steps += 1
    ph["step (lm_head end to lm_head end)"].append((seq[-1]["e1"] - L[a]["e1"]) / 1e3)
    for l in range(22):
        q, at, o, gu, dn = seq[5 * l : 5 * l + 5]
        nxt = seq[5 * l + 5]
        ph["qkv: release (prev end -> first wait)"].append((q["w0"] - (L[a]["e1"] if l == 0 else seq[5 * l - 1]["e1"])) / 1e3)
        ph["qkv: first wait -> last end"].append((q["e1"] - q["w0"]) / 1e3)
        ph["attn: first block start - qkv end"].append((at["t0"] - q["e1"]) / 1e3)
        ph["attn: qkv end -> first wait"].append((at["w0"] - q["e1"]) / 1e3)
        ph["attn: first wait -> last wait"].append((at["w1"] - at["w0"]) / 1e3)
        ph["attn: last wait -> last partition done"].append((at["s1"] - at["w1"]) / 1e3)
        ph["attn: last partition done -> last end (fold)"].append((at["e1"] - at["s1"]) / 1e3)
        ph["attn: of which last partition done -> last counted"].append((at["c1"] - at["s1"]) / 1e3)
        f = max(at["recs"], key=lambda r: r[7])  # the block whose partition was done last
        ph["last partition's block: wait -> warp 0's tile in"].append((f[10] - f[6]) / 1e3)
        ph["last partition's block: tile in -> tile computed"].append((f[11] - f[10]) / 1e3)
        ph["last partition's block: tile computed -> partial done"].append((f[7] - f[11]) / 1e3)
        ph["median block: wait -> tile in"].append(statistics.median((r[10] - r[6]) / 1e3 for r in at["recs"]))
        ph["median block: tile in -> tile computed"].append(statistics.median((r[11] - r[10]) / 1e3 for r in at["recs"]))
        ph["median block: tile computed -> partial done"].append(statistics.median((r[7] - r[11]) / 1e3 for r in at["recs"]))
        ph["attn: blocks started before qkv's end"].append(sum(1 for r in at["recs"] if r[5] < q["e1"]))
        ph["attn: working blocks"].append(at["n"])
        ph["attn: partitions (tag)"].append(at["tag"])
        ph["o: attn end -> first wait"].append((o["w0"] - at["e1"]) / 1e3)
        ph["o: first wait -> last end"].append((o["e1"] - o["w0"]) / 1e3)
        ph["gate_up: o end -> first wait"].append((gu["w0"] - o["e1"]) / 1e3)
        ph["gate_up: first wait -> last end"].append((gu["e1"] - gu["w0"]) / 1e3)
        ph["down: gate_up end -> first wait"].append((dn["w0"] - gu["e1"]) / 1e3)
        ph["down: first wait -> last end"].append((dn["e1"] - dn["w0"]) / 1e3)
        ph["layer: qkv end -> o first wait"].append((o["w0"] - q["e1"]) / 1e3)
        ph["layer (qkv first wait to next qkv first wait)"].append((nxt["w0"] - q["w0"]) / 1e3)
print(f"{' '.join(sys.argv[1:])}: {len(recs)} records, {len(L)} launches, {steps} complete steps")
for k, v in ph.items():
    print(f"  {k:52s} median {statistics.median(v):8.2f}  min {min(v):8.2f}  max {max(v):8.2f}")
