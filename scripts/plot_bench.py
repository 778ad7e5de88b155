#!/usr/bin/env python3
"""Generated tokens/s against concurrent sequences, next to the roofline (issue 4 §5).

    python3 scripts/plot_bench.py OUT/loom.json [more loom.json ...] [--hf OUT/summary.json]
                                  --out bench/results/<date>-<gpu>-roofline.png

Points: every `loom bench --json` file's latency rows (batch B, tokens/s = B·P / s per frame)
and throughput runs (mean sequences per step, generated tokens / wall time; unshared and
shared-context groups), plus, with --hf, the HF transformers rows of scripts/bench_hf.sh's
summary.json (or hf_bench.py JSON files).

Roofline, per loom JSON (its device's measured ceilings), for B sequences decoding together:

    tokens/s ≤ B / max((W + B·L·kv) / BW,  B·flops_per_token(L) / peak)

  W   step_weight_bytes (every weight read per step: all but the input-embedding table)
  BW  copy_gbps (measured device-to-device copy bandwidth)     peak  gemm_tflops (measured)
  L   mean context of a sequence while it decodes: (context frames + frames/2) · S slots
  kv  bytes of K and V per slot: layers · 2 · kv_heads · head_dim · (2 for bf16, 4 for f32);
      Terra: 22 · 2 · 256 · 2 = 22,528 B
  flops_per_token(L) = 2 · W / weight_bytes + 4 · layers · q_dim · L (attention over L slots)

Loom points are labelled with their tokens/s and the fraction of the roofline they reach.
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
    W = float(bench["step_weight_bytes"])
    L = (bench.get("context_frames", 3) + bench.get("frames", 0) / 2.0) * shapes["S"]
    kv = shapes["layers"] * 2 * shapes["kv_dim"] * elem
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


def loom_points(bench, P):
    """[(label, sequences, tokens/s)] from one loom JSON."""
    pts = []
    for r in bench.get("latency", []):
        if r.get("s_per_frame"):
            pts.append(("latency", r["batch"], r["batch"] * P / r["s_per_frame"]))
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("loom", nargs="+", help="loom bench --json files")
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
    colors = ["tab:blue", "tab:green", "tab:purple", "tab:brown"]
    markers = {"latency": "o"}
    notes, max_b, all_y, devs = [], 1.0, [], []
    for i, path in enumerate(args.loom):
        with open(path) as f:
            bench = json.load(f)
        color = colors[i % len(colors)]
        shapes = model_shapes(bench, path)
        dev = bench.get("device", "?").replace("NVIDIA ", "")
        devs.append(dev)
        tag = " (%s)" % dev if len(args.loom) > 1 else ""  # one device: it goes in the title
        pts = loom_points(bench, shapes["P"])
        max_b = max([max_b] + [b for _, b, _ in pts])
        bw = bench.get("copy_gbps") or args.bw_gbps or 0
        tf = bench.get("gemm_tflops") or args.tflops or 0
        both = None
        if bench.get("step_weight_bytes") and (bw > 0 or tf > 0):
            both, mem, comp, info = roofline(bench, shapes, bw, tf)
            bs = [2 ** (k / 8.0) for k in range(0, 8 * 12 + 1)]  # 1 … 4096
            bs = [b for b in bs if b <= max(1024, 4 * max_b)]
            ax.plot(bs, [both(b) for b in bs], color=color, lw=2,
                    label="roofline%s: min(memory, compute)" % tag)
            if bw > 0:
                ax.plot(bs, [mem(b) for b in bs], color=color, lw=1, ls="--",
                        label="weights + KV reads at %.0f GB/s" % bw)
            if tf > 0:
                ax.plot(bs, [comp(b) for b in bs], color=color, lw=1, ls=":",
                        label="compute at %.3g TFLOP/s" % tf)
                all_y.append(comp(1))
            all_y += [both(b) for b in bs]
            where = shapes["source"] if shapes["source"].startswith("Terra") else os.path.dirname(
                shapes["source"])
            notes.append("%s: W = %.3f GB/step, L = %.0f slots (%s ctx + %s/2 frames), KV %d B/slot, "
                         "%.2f GFLOP/token; shapes: %s" % (
                             dev, info["W_bytes"] / 1e9, info["L_slots"],
                             bench.get("context_frames"), bench.get("frames"),
                             info["kv_bytes_per_slot"], info["flops_per_token"] / 1e9, where))
        else:
            notes.append("%s: no measured ceilings in %s (pass --bw-gbps / --tflops): no roofline"
                         % (dev, os.path.basename(path)))
            print("plot_bench: " + notes[-1], file=sys.stderr)
        for label, b, y in pts:
            m = markers.get(label, "*" if "share" in label else "s")
            ax.scatter([b], [y], marker=m, s=110 if m == "*" else 55, color=color, zorder=3,
                       edgecolors="black", linewidths=0.5,
                       label="loom %s%s" % (label if label != "latency" else "latency runs",
                                            tag))
            text = "%.0f" % y + (" (%.0f%%)" % (100 * y / both(b)) if both else "")
            ax.annotate(text, (b, y), textcoords="offset points", xytext=(6, -12),
                        fontsize=8, color=color)
            all_y.append(y)
    for label, b, y in hf_points(args.hf):
        ax.scatter([b], [y], marker="v" if "compile" in label else "X", s=70, color="tab:red",
                   zorder=3, edgecolors="black", linewidths=0.5, label=label)
        ax.annotate("%.1f" % y if y < 100 else "%.0f" % y, (b, y), textcoords="offset points",
                    xytext=(6, 4), fontsize=8, color="tab:red")
        all_y.append(y)

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("concurrent sequences (batch size; mean sequences per step for the job runs)")
    ax.set_ylabel("generated tokens / s")
    ax.set_title(args.title or "generated tokens/s against concurrent sequences, next to the "
                 "roofline\n%s" % ", ".join(sorted(set(devs))), fontsize=11)
    if all_y:
        finite = [y for y in all_y if y > 0 and y != float("inf")]
        ax.set_ylim(min(finite) / 2, max(finite) * 2)
    ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    seen, h2, l2 = set(), [], []
    for h, lab in zip(handles, labels):
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
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
