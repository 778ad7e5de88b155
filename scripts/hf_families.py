#!/usr/bin/env python3
"""Tiny random checkpoints and HF goldens for the model families loom loads by table alone
(issue 12 §4): OPT (models/opt.json) and GPT-2 (models/gpt2.json), each written by
transformers 4.39.3's own save_pretrained, so names, tied weights and config keys are HF's.
Goldens have scripts/hf_reference.py's format and semantics (plain token generation, loom's
sampler mirrored by scripts/loom_sampler.py) and are checked by tests/test_golden.cpp.

    python scripts/hf_families.py make --kind opt  --seed 41 --out testdata/tiny_opt
    python scripts/hf_families.py make --kind gpt2 --seed 51 --out testdata/tiny_gpt2
    python scripts/hf_families.py check --dir testdata/tiny_opt     # recompute and compare

Weights: float32 draws from numpy default_rng(seed) over the model's named parameters in
order: matrices 0.15 N(0,1), biases 0.1 N(0,1), LayerNorm weights 1 + 0.1 N(0,1).
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as hr  # noqa: E402

TINY = dict(vocab=512, hidden=64, layers=2, heads=4, ffn=128, positions=64)


def hf_config(kind):
    from transformers import GPT2Config, OPTConfig
    if kind == "opt":
        return OPTConfig(vocab_size=TINY["vocab"], hidden_size=TINY["hidden"],
                         num_hidden_layers=TINY["layers"], num_attention_heads=TINY["heads"],
                         ffn_dim=TINY["ffn"], max_position_embeddings=TINY["positions"],
                         word_embed_proj_dim=TINY["hidden"], bos_token_id=1, eos_token_id=2,
                         pad_token_id=0, architectures=["OPTForCausalLM"])
    return GPT2Config(vocab_size=TINY["vocab"], n_embd=TINY["hidden"], n_layer=TINY["layers"],
                      n_head=TINY["heads"], n_inner=TINY["ffn"], n_positions=TINY["positions"],
                      bos_token_id=1, eos_token_id=2, architectures=["GPT2LMHeadModel"])


def model_class(kind):
    from transformers import GPT2LMHeadModel, OPTForCausalLM
    return OPTForCausalLM if kind == "opt" else GPT2LMHeadModel


@torch.no_grad()
def make(kind, seed, out_dir):
    cfg = hf_config(kind)
    cfg._attn_implementation = "eager"
    with hr._no_init():
        model = model_class(kind)(cfg).float().eval()
    model.tie_weights()  # no_init_weights skips it; untied, both tables would be saved
    rng = np.random.default_rng(seed)
    for name, p in model.named_parameters():  # tied lm_head appears once, as the embedding
        x = rng.standard_normal(tuple(p.shape), dtype=np.float32)
        if p.dim() == 1 and ("norm" in name or ".ln_" in name):
            x = 1.0 + 0.1 * x
        else:
            x = (0.1 if name.endswith(".bias") else 0.15) * x
        p.copy_(torch.from_numpy(x))
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    for fn in ("generation_config.json",):
        if os.path.exists(os.path.join(out_dir, fn)):
            os.remove(os.path.join(out_dir, fn))


class Reference:
    """A saved checkpoint as transformers loads it, answering hf_reference's generator."""

    kind = "llama"  # plain token generation in hf_reference.generate

    def __init__(self, ckpt_dir):
        from transformers import AutoModelForCausalLM
        self.model = AutoModelForCausalLM.from_pretrained(
            ckpt_dir, torch_dtype=torch.float32, attn_implementation="eager").eval()
        with open(os.path.join(ckpt_dir, "config.json")) as f:
            self.config = json.load(f)
        self.vocab = self.config["vocab_size"]
        self.eos = self.config.get("eos_token_id")

    @torch.no_grad()
    def token_logits(self, ids):
        out = self.model(input_ids=torch.tensor([list(ids)]), use_cache=False)
        return out.logits[0, -1].float().numpy()


def compute_golden(ckpt_dir, kind, seed):
    ref = Reference(ckpt_dir)
    golden = {"kind": kind, "seed": seed, "dtype": "f32",
              "made_by": "scripts/hf_families.py make --kind %s --seed %d" % (kind, seed),
              "cases": []}
    low = []
    for name, job, draws in hr.golden_cases("llama", ref.config, seed):
        margins = []
        samples, logits = hr.generate(ref, job, draws, margins)
        case = {"name": name, "job": job, "samples": samples}
        if draws:
            case["logits"] = logits
        golden["cases"].append(case)
        low.append((name, min(margins)))
    return golden, low


def cmd_make(args):
    t0 = time.time()
    make(args.kind, args.seed, args.out)
    golden, low = compute_golden(args.out, args.kind, args.seed)
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        f.write(hr.dump_golden(golden))
    for name, m in low:
        print("%s: smallest winner margin %.4g" % (name, m))
    print("wrote %s (%.1f s)" % (args.out, time.time() - t0))
    if min(m for _, m in low) < 1e-3:
        print("warning: a draw is decided by less than 1e-3; pick another --seed")
        return 1
    return 0


def cmd_check(args):
    with open(os.path.join(args.dir, "golden.json")) as f:
        want = json.load(f)
    got, _ = compute_golden(args.dir, want["kind"], want["seed"])
    ok = True
    for cw, cg in zip(want["cases"], got["cases"]):
        if cw["job"] != cg["job"] or cw["samples"] != cg["samples"]:
            print("case %s: jobs or token streams differ" % cw["name"])
            ok = False
        for lw, lg in zip(cw.get("logits", []), cg.get("logits", [])):
            a, b = np.array(lw["values"]), np.array(lg["values"])
            if np.max(np.abs(a - b)) / np.max(np.abs(a)) > 1e-6:
                print("case %s draw %d: logits differ" % (cw["name"], lw["draw_index"]))
                ok = False
    print("%s: %s" % (args.dir, "golden reproduced" if ok else "MISMATCH"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="tiny random checkpoint + golden.json")
    m.add_argument("--kind", choices=["opt", "gpt2"], required=True)
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--out", required=True)
    c = sub.add_parser("check", help="recompute a golden.json and compare")
    c.add_argument("--dir", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    return {"make": cmd_make, "check": cmd_check}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
