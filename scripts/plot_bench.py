#!/usr/bin/env python3
"""Generated tokens/s against concurrent sequences, next to the roofline (issue 4 §5).

    python3 scripts/plot_bench.py OUT/loom.json [report.json ...] [--hf OUT/summary.json]
                                  --out bench/results/<date>-<gpu>-roofline.png

Points: every `loom bench --json` file's latency rows (batch B) and throughput runs (mean
sequences per step; unshared and shared-context groups), every `loom run --report` file (mean
sequences per step), plus, with --hf, the HF transformers rows of scripts/bench_hf.sh's
summary.json (or hf_bench.py JSON files).

tokens/s is read from the JSON ("tokens_per_s"; a run report's "generated.tokens_per_s"), never
recomputed here: loom has one definition (engine/report.h tokens_per_s), generated tokens over
the wall time of the engine run, shared by the bench table, the bench JSON and run reports.
(Before loom 0.2.0 the bench divided by the step time alone, and this script computed B·P / s
per frame for latency rows, so old files plot their own older numbers.)

Roofline, per loom JSON (its device's measured ceilings), for B sequences decoding together:

    tokens/s ≤ B / max((W + B·L·kv) / BW,  B·flops_per_token(L) / peak)

  W   step_weight_bytes (every weight read per step: all but the input-embedding table)
  BW  copy_gbps (measured device-to-device copy bandwidth)     peak  gemm_tflops (measured)
  L   mean context of a sequence while it decodes: (context frames + frames/2) · S slots
  kv  bytes of K and V per slot: layers · 2 · kv_heads · head_dim · (1 fp8, 2 bf16, 4 f32 KV);
      Terra: 22 · 2 · 256 · 2 = 22,528 B
  flops_per_token(L) = 2 · W / weight_bytes + 4 · layers · q_dim · L (attention over L slots)

Loom points are labelled with their tokens/s and the fraction of the roofline they reach;
labels are moved until none overlaps another or a point. Rooflines of files with the same
ceilings are drawn once, and a bound is drawn (and named in the legend) only where it shows
apart from the roofline inside the plotted range.
Shapes come from the checkpoint's config.json when the JSON's "model" path is readable, else
Terra's. The shared-context run reads each group's prompt KV once, so it may sit above the
(unshared) roofline. On a CPU JSON (no measured ceilings) pass --bw-gbps / --tflops, or only
the points are drawn. Needs matplotlib (Agg backend, no display).
"""

import argparse
import json
import os
import sys

TERRA = {"layers": 22, "kv_dim": 256, "q_dim": 2048, "P": 576, "S": 582}
HERE = os.path.dirname(os.path.abspath(__file__))


def model_shapes(bench, json_path):
    """{layers, kv_dim, q_dim, P, S, source} from the checkpoint's config.json, else Terra's."""
    model = bench.get("model") or ""
    for base in ("", os.path.dirname(os.path.abspath(json_path)), os.path.join(HERE, "..")):
        path = os.path.join(base, model, "config.json") if model else ""
        if path and os.path.exists(path):
            with open(path) as f:
                c = json.load(f)
            hd = c["hidden_size"] // c["num_attention_heads"]
            P = c.get("num_image_patches", TERRA["P"])
            return {"layers": c["num_hidden_layers"],
                    "kv_dim": c.get("num_key_value_heads", c["num_attention_heads"]) * hd,
                    "q_dim": c["num_attention_heads"] * hd, "P": P,
                    "S": P + c.get("num_action_tokens", 0), "source": path}
    return dict(TERRA, source="Terra defaults (no config.json at %r)" % model)


def roofline(bench, shapes, bw_gbps, tflops):
    """B → tokens/s bound, and the two separate bounds, for one loom JSON."""
    elem = 4.0 if bench.get("dtype") == "f32" else 2.0
    kv_elem = {"fp8": 1.0, "bf16": 2.0, "f32": 4.0}.get(bench.get("kv_dtype"), elem)
    W = float(bench["step_weight_bytes"])
    L = (bench.get("context_frames", 3) + bench.get("frames", 0) / 2.0) * shapes["S"]
    kv = shapes["layers"] * 2 * shapes["kv_dim"] * kv_elem
    flops_tok = 2.0 * W / elem + 4.0 * shapes["layers"] * shapes["q_dim"] * L
    bw, peak = bw_gbps * 1e9, tflops * 1e12

    def mem(B):
        return B / ((W + B * L * kv) / bw) if bw > 0 else float("inf")

    def comp(B):
        return peak / flops_tok if peak > 0 else float("inf")

    def both(B):
        return min(mem(B), comp(B))

    info = {"W_bytes": W, "L_slots": L, "kv_bytes_per_slot": kv, "flops_per_token": flops_tok,
            "bw_gbps": bw_gbps, "tflops": tflops}
    return both, mem, comp, info


def is_run_report(d):
    return "generated" in d and "time_s" in d and "batch" in d


def loom_points(bench, path):
    """[(label, sequences, tokens/s)] from one loom bench JSON or run report."""
    pts = []
    if is_run_report(bench):
        seqs = bench["batch"].get("mean_seqs") or 1
        tps = bench["generated"].get("tokens_per_s") or 0
        if tps > 0:
            pts.append(("run %s" % os.path.basename(path), max(1.0, seqs), tps))
        return pts
    for r in bench.get("latency", []):
        if r.get("tokens_per_s"):
            pts.append(("latency", r["batch"], r["tokens_per_s"]))
    for r in bench.get("throughput", []):
        label = ("%d jobs, groups of %d share context" % (r["jobs"], r["shared_group"])
                 if r.get("shared_group", 0) > 1 else "%d jobs" % r["jobs"])
        pts.append((label, r["mean_seqs"], r["tokens_per_s"]))
    return pts


def hf_points(paths):
    """[(label, batch, tokens/s)] from bench_hf.sh summary.json files or hf_bench.py JSONs."""
    pts = []
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        if "table" in d:  # summary.json
            for r in d["table"]:
                if r["impl"].startswith("HF") and r.get("tokens_per_s"):
                    pts.append((r["impl"].split(" attn=")[0], r["batch"], r["tokens_per_s"]))
        elif d.get("tool") == "hf_bench" and d.get("status") == "ok":
            label = "HF %s" % ("eager (DynamicCache)" if d["mode"] == "eager"
                               else "static cache + compile")
            pts.append((label, d["batch"], d["tokens_per_s"]))
        else:
            print("plot_bench: %s: neither a summary.json nor an ok hf_bench JSON, ignored" % p,
                  file=sys.stderr)
    return pts


def device_name(bench):
    dev = bench.get("device", "?")
    if isinstance(dev, dict):  # a run report
        dev = dev.get("name", "?")
    return str(dev).replace("NVIDIA ", "")


def visible(ys, ylim, ref, tol=0.05):
    """Whether a bound's curve shows apart from the roofline `ref` inside the y range."""
    lo, hi = ylim
    return any(lo <= y <= hi and abs(y - r) > tol * r for y, r in zip(ys, ref))


# Labels on a white ground, so that a roofline crossing one does not cover its digits.
LABEL_BOX = dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.85)


def place_labels(fig, ax, labels):
    """Annotates (x, y, text, color) points; each label takes the first offset at which its box
    overlaps no label placed before and no point."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    points = [ax.transData.transform((x, y)) for x, y, _, _ in labels]
    taken = []
    offsets = [(6, -12), (6, 5), (-8, 5), (-8, -12), (6, -24), (6, 17), (-8, -24), (-8, 17),
               (6, -36), (6, 29), (-8, -36), (-8, 29)]
    for x, y, text, color in labels:
        for dx, dy in offsets:
            a = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy),
                            fontsize=8, color=color, ha="left" if dx > 0 else "right",
                            bbox=LABEL_BOX)
            box = a.get_window_extent(renderer).expanded(1.05, 1.15)
            # (a point's marker reaches ~7 px from its centre at the figure's resolution)
            hits_point = any(box.x0 - 7 <= px <= box.x1 + 7 and box.y0 - 7 <= py <= box.y1 + 7
                             for px, py in points)
            if not hits_point and not any(box.overlaps(b) for b in taken):
                taken.append(box)
                break
            a.remove()
        else:  # every offset collides: keep the first, rather than drop the value
            a = ax.annotate(text, (x, y), textcoords="offset points", xytext=offsets[0],
                            fontsize=8, color=color, bbox=LABEL_BOX)
            taken.append(a.get_window_extent(renderer))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("loom", nargs="+", help="loom bench --json files and loom run --report files")
    ap.add_argument("--hf", nargs="*", default=[], help="bench_hf.sh summary.json / hf_bench JSON")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--bw-gbps", type=float, help="copy bandwidth when the JSON has none (CPU)")
    ap.add_argument("--tflops", type=float, help="GEMM peak when the JSON has none (CPU)")
    ap.add_argument("--title")
    args = ap.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(14, 6.5), dpi=120)
    colors = ["tab:blue", "tab:green", "tab:purple", "tab:brown", "tab:orange", "tab:olive"]
    markers = {"latency": "o"}
    notes, max_b, all_y, devs, labels = [], 1.0, [], [], []
    roofs = []  # (key, color, tag, both, mem, comp, bw, tf) to draw once the y range is known
    benches = []
    for path in args.loom:
        with open(path) as f:
            benches.append((path, json.load(f)))
    several = len(set(device_name(b) for _, b in benches)) > 1
    # Files of one device that differ only in KV dtype are named by it, not by file name.
    kv_tags = [b.get("kv_dtype") for _, b in benches]
    by_kv = not several and None not in kv_tags and len(set(kv_tags)) == len(kv_tags)
    for i, (path, bench) in enumerate(benches):
        color = colors[i % len(colors)]
        shapes = model_shapes(bench, path)
        dev = device_name(bench)
        devs.append(dev)
        # One device: it goes in the title, and several files of it are told apart by name.
        tag = (" (%s)" % (dev if several else "%s KV" % bench["kv_dtype"] if by_kv
                          else os.path.basename(path)) if len(benches) > 1 else "")
        pts = loom_points(bench, path)
        if not pts:
            print("plot_bench: %s: no tokens/s to plot (neither bench rows nor a run report)"
                  % path, file=sys.stderr)
        max_b = max([max_b] + [b for _, b, _ in pts])
        bw = bench.get("copy_gbps") or args.bw_gbps or 0
        tf = bench.get("gemm_tflops") or args.tflops or 0
        both = None
        if bench.get("step_weight_bytes") and (bw > 0 or tf > 0):
            both, mem, comp, info = roofline(bench, shapes, bw, tf)
            key = (dev, round(info["W_bytes"]), round(info["L_slots"]),
                   info["kv_bytes_per_slot"], round(bw, -1), round(tf, 0))
            if key not in [r[0] for r in roofs]:
                roofs.append((key, color, tag, both, mem, comp, bw, tf))
            where = shapes["source"] if shapes["source"].startswith("Terra") else os.path.dirname(
                shapes["source"])
            note = ("%s: W = %.3f GB/step, L = %.0f slots (%s ctx + %s/2 frames), KV %d B/slot, "
                    "%.2f GFLOP/token; shapes: %s" % (
                        dev, info["W_bytes"] / 1e9, info["L_slots"], bench.get("context_frames"),
                        bench.get("frames"), info["kv_bytes_per_slot"],
                        info["flops_per_token"] / 1e9, where))
            if note not in notes:
                notes.append(note)
        elif not is_run_report(bench):
            notes.append("%s: no measured ceilings in %s (pass --bw-gbps / --tflops): no roofline"
                         % (dev, os.path.basename(path)))
            print("plot_bench: " + notes[-1], file=sys.stderr)
        for label, b, y in pts:
            m = markers.get(label, "D" if label.startswith("run ") else
                            "*" if "share" in label else "s")
            ax.scatter([b], [y], marker=m, s=110 if m == "*" else 55, color=color, zorder=3,
                       edgecolors="black", linewidths=0.5,
                       label="loom %s%s" % (label if label != "latency" else "latency runs",
                                            tag))
            text = "%.0f" % y + (" (%.0f%%)" % (100 * y / both(b)) if both else "")
            labels.append((b, y, text, color))
            all_y.append(y)
    for label, b, y in hf_points(args.hf):
        ax.scatter([b], [y], marker="v" if "compile" in label else "X", s=70, color="tab:red",
                   zorder=3, edgecolors="black", linewidths=0.5, label=label)
        labels.append((b, y, "%.1f" % y if y < 100 else "%.0f" % y, "tab:red"))
        all_y.append(y)

    bs = [2 ** (k / 8.0) for k in range(0, 8 * 12 + 1)]  # 1 … 4096
    bs = [b for b in bs if b <= max(1024, 4 * max_b)]
    for _, _, _, both, _, _, _, _ in roofs:
        all_y += [both(b) for b in bs]
    finite = [y for y in all_y if y > 0 and y != float("inf")]
    ylim = (min(finite) / 2, max(finite) * 2) if finite else (1, 10)
    for _, color, tag, both, mem, comp, bw, tf in roofs:
        ref = [both(b) for b in bs]
        ax.plot(bs, ref, color=color, lw=2, label="roofline%s: min(memory, compute)" % tag)
        for bound, on, style, name in ((mem, bw > 0, "--", "weights + KV reads at %.0f GB/s" % bw),
                                       (comp, tf > 0, ":", "compute at %.3g TFLOP/s" % tf)):
            ys = [bound(b) for b in bs]
            if on and visible(ys, ylim, ref):
                ax.plot(bs, ys, color=color, lw=1, ls=style, label=name + tag)

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("concurrent sequences (batch size; mean sequences per step for the job runs)")
    ax.set_ylabel("generated tokens / s (wall time of the run)")
    ax.set_title(args.title or "generated tokens/s against concurrent sequences, next to the "
                 "roofline\n%s" % ", ".join(sorted(set(devs))), fontsize=11)
    ax.set_ylim(*ylim)
    ax.grid(True, which="both", alpha=0.3)
    handles, names = ax.get_legend_handles_labels()
    seen, h2, l2 = set(), [], []
    for h, lab in zip(handles, names):
        if lab not in seen:
            seen.add(lab)
            h2.append(h)
            l2.append(lab)
    ax.legend(h2, l2, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.subplots_adjust(left=0.07, right=0.68)
    if notes:
        fig.text(0.01, 0.005, "\n".join(notes + [
            "roofline: tokens/s <= B / max((W + B*L*KV)/BW, B*FLOPs/token/peak); the shared-"
            "context run reads prompt KV once per group and may pass it"]),
            fontsize=6.5, va="bottom")
        fig.subplots_adjust(bottom=0.08 + 0.022 * (len(notes) + 1))
    place_labels(fig, ax, labels)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, bbox_inches="tight")  # the legend beside the axes, whole
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
