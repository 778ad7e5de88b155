#!/usr/bin/env python3
"""Critical path of a megakernel step from cuda_bench --megakernel's raw timeline.

  python3 scripts/mega_timeline.py RESULT.json

RESULT.json: cuda_bench's JSON (its "trace" rows carry "timeline" for batch 1 and 8 at ctx 600: one
[cta, op, layer, start, wait, staged, end] per instruction of one traced step, µs from the
step's first start; staged -1 where the instruction is not a GEMV). For each op of a layer along
the chain qkv -> attn_partial (+ its reduce) -> o_proj -> gate_up -> down, measured from the
previous op's last end (the moment its input is complete): when the first and the last CTA
saw their wait satisfied, when the last had its input staged, when the last ended, and what the
CTA that ended last spent on staging and on its own units; medians over the layers. Then, per op,
who that late CTA is: in how many layers it is also the CTA that ended the previous op of the
chain, and when its own instruction before this one ended (median, from the previous op's last
end: about 0 when its previous instruction was that op's last; its weights for this op were
issued only then).
"""
import json
import statistics
import sys

OPS = ["embed", "qkv", "attn_partial", "attn_reduce", "o_proj", "gate_up", "down",
       "final_norm", "lm_head", "draw"]
CHAIN = [1, 2, 4, 5, 6]  # qkv, attn_partial, o_proj, gate_up, down


def analyse(rows, label):
    by = {}
    for cta, op, layer, start, wait, staged, end in rows:
        by.setdefault((op, layer), []).append((cta, start, wait, staged, end))
    layers = 1 + max(l for (op, l) in by if op in CHAIN)
    step = max(r[6] for r in rows) - min(r[3] for r in rows)
    print(f"\n{label}: one step {step:.1f} us, {len(rows)} instructions, {layers} layers")
    cols = ["first seen", "last seen", "last staged", "last end", "ctas",
            "late: stage", "late: units"]
    print(f"  {'op':13s}" + "".join(f"{c:>13s}" for c in cols))
    per_op = {op: [] for op in CHAIN}
    late_same = {op: 0 for op in CHAIN}
    late_prev_end = {op: [] for op in CHAIN}
    ends = {}  # cta -> sorted ends of its instructions
    for cta, op, layer, start, wait, staged, end in rows:
        ends.setdefault(cta, []).append(end)
    for v in ends.values():
        v.sort()
    prev_end = max(e for (_, _, _, _, e) in by[(0, 0)])
    prev_late = None
    for l in range(layers):
        for op in CHAIN:
            rs = by.get((op, l), [])
            if op == 2:  # idle splits start and end at once: leave them out
                rs = [r for r in rs if r[4] - r[1] - r[2] > 0.05] or rs
            seen = [s + w for (_, s, w, _, _) in rs]
            staged = [g for (_, _, _, g, _) in rs if g >= 0]
            last = max(rs, key=lambda r: r[4])
            late_stage = (last[3] - last[1] - last[2]) if last[3] >= 0 else 0.0
            late_units = last[4] - (last[3] if last[3] >= 0 else last[1] + last[2])
            per_op[op].append([min(seen) - prev_end, max(seen) - prev_end,
                               (max(staged) - prev_end) if staged else 0.0,
                               last[4] - prev_end, len(rs), late_stage, late_units])
            late_same[op] += last[0] == prev_late
            before = [e for e in ends[last[0]] if e <= last[1]]
            if before:
                late_prev_end[op].append(before[-1] - prev_end)
            prev_end = last[4]
            prev_late = last[0]
    total = 0.0
    for op in CHAIN:
        med = [statistics.median(v[i] for v in per_op[op]) for i in range(7)]
        total += med[3]
        print(f"  {OPS[op]:13s}" + "".join(f"{x:13.2f}" for x in med))
    print(f"  a layer along the chain (sum of the medians' last end): {total:.1f} us")
    print("  the CTA that ends an op: also ended the previous op (layers) / its instruction "
          "before ended (us from that op's last end, median)")
    for op in CHAIN:
        pe = statistics.median(late_prev_end[op]) if late_prev_end[op] else float("nan")
        print(f"  {OPS[op]:13s}{late_same[op]:8d}/{layers}{pe:13.2f}")
    lm = by.get((8, 0), [])
    if lm:
        fn_end = max(e for (_, _, _, _, e) in by[(7, 0)])
        print(f"  lm_head: from final_norm's end to its last end {max(r[4] for r in lm) - fn_end:.1f} us"
              f" ({len(lm)} CTAs)")


def main():
    r = json.load(open(sys.argv[1]))
    for row in r.get("trace", []):
        if "timeline" in row:
            knobs = "".join(f" {k} {row[k]}" for k in ("gemv_early", "gemv_inflight", "attn_apart")
                            if row.get(k))
            analyse(row["timeline"],
                    f"batch {row['batch']} ctx {row['ctx']} skip_math {row['skip_math']}{knobs}")


if __name__ == "__main__":
    main()
