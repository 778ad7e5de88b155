#!/usr/bin/env python3
"""Tiny random checkpoints and HF goldens for the model families loom loads by table alone
(issue 12 §4): OPT (models/opt.json), GPT-2 (models/gpt2.json) and a Llama whose frames carry
their actions as vocabulary tokens (models/llama_action_tokens.json), each written by
transformers 4.39.3's own save_pretrained, so names, tied weights and config keys are HF's.
Goldens have scripts/hf_reference.py's format and semantics (loom's sampler mirrored by
scripts/loom_sampler.py) and are checked by tests/test_golden.cpp.

    python scripts/hf_families.py make --kind opt  --seed 41 --out testdata/tiny_opt
    python scripts/hf_families.py make --kind gpt2 --seed 51 --out testdata/tiny_gpt2
    python scripts/hf_families.py make --kind action_tokens --seed 61 --out testdata/tiny_action_tokens
    python scripts/hf_families.py check --dir testdata/tiny_opt     # recompute and compare
    python scripts/hf_families.py jobs --dir testdata/tiny_action_tokens \
        --out testdata/jobs/tiny_action_tokens.jsonl

Action tokens (MineWorld/WHAM style): a frame is P image ids then A action ids, all ordinary
tokens of one vocabulary; the reference is LlamaForCausalLM over the interleaved ids at
positions 0.. of the round. Frame loop as loom's (hf_reference.py's, with ids for rows): the
round is the context frames; before each generated frame g, a round holding T frames restarts
from its last `overlap` frames (image and action ids) at position 0; then P image tokens, token
t drawn from the last position's logits with draw index g*P + t, only ids in
[0, image_vocab_size) competing; then the frame joins the round followed by
action_token_ids[g]. T is frames_per_round, else max_position_embeddings / (P + A).

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
# Action tokens: P = 8 image + A = 3 action ids per frame, 6 frames a round (66 positions);
# image ids [0, 480), action ids [480, 512).
ACT = dict(P=8, A=3, T=6, image_vocab=480, kv_heads=2)
KINDS = ("opt", "gpt2", "action_tokens")


def hf_config(kind):
    from transformers import GPT2Config, LlamaConfig, OPTConfig
    if kind == "action_tokens":
        return LlamaConfig(vocab_size=TINY["vocab"], hidden_size=TINY["hidden"],
                           num_hidden_layers=TINY["layers"], num_attention_heads=TINY["heads"],
                           num_key_value_heads=ACT["kv_heads"], intermediate_size=TINY["ffn"],
                           max_position_embeddings=ACT["T"] * (ACT["P"] + ACT["A"]),
                           rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2,
                           tie_word_embeddings=False, num_image_patches=ACT["P"],
                           num_action_tokens=ACT["A"], image_vocab_size=ACT["image_vocab"],
                           architectures=["LlamaActionTokensForCausalLM"])
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
    from transformers import GPT2LMHeadModel, LlamaForCausalLM, OPTForCausalLM
    return {"opt": OPTForCausalLM, "gpt2": GPT2LMHeadModel,
            "action_tokens": LlamaForCausalLM}[kind]


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
    if kind == "action_tokens":
        # save_pretrained writes the class name; loom picks the table by this one.
        path = os.path.join(out_dir, "config.json")
        with open(path) as f:
            cfg = json.load(f)
        cfg["architectures"] = list(hf_config(kind).architectures)
        with open(path, "w") as f:
            f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


class Reference:
    """A saved checkpoint as transformers loads it, answering hf_reference's generator."""

    kind = "llama"  # plain token generation in hf_reference.generate

    def __init__(self, ckpt_dir, kind=None):
        from transformers import AutoModelForCausalLM, LlamaForCausalLM
        cls = LlamaForCausalLM if kind == "action_tokens" else AutoModelForCausalLM
        self.model = cls.from_pretrained(
            ckpt_dir, torch_dtype=torch.float32, attn_implementation="eager").eval()
        with open(os.path.join(ckpt_dir, "config.json")) as f:
            self.config = json.load(f)
        self.vocab = self.config["vocab_size"]
        self.eos = self.config.get("eos_token_id")

    @torch.no_grad()
    def token_logits(self, ids):
        out = self.model(input_ids=torch.tensor([list(ids)]), use_cache=False)
        return out.logits[0, -1].float().numpy()


# ---------------------------------------------------------------------------------------------
# Action tokens


def frame_layout(cfg):
    """P, A, T and the image-id range [0, image_vocab_size) of an action-token config."""
    P, A = cfg["num_image_patches"], cfg["num_action_tokens"]
    T = cfg.get("frames_per_round") or cfg["max_position_embeddings"] // (P + A)
    return P, A, T, cfg.get("image_vocab_size") or cfg["vocab_size"]


def generate_action_tokens(ref, job, logit_draws=(), margins=None):
    """[{sample, frames}] and [{sample, draw_index, values}] for one action-token job (the
    frame loop of the module docstring; every step recomputes the whole round)."""
    P, A, T, hi = frame_layout(ref.config)
    S = P + A
    prompt, num_frames = job["prompt_token_ids"], job["num_frames"]
    overlap = job.get("overlap", 3)
    acts = job.get("action_token_ids", [])
    n_ctx = len(prompt) // S
    if len(prompt) % S or n_ctx > T or not 0 < overlap < T or len(acts) < num_frames - 1:
        raise ValueError("bad job %s" % job.get("id"))
    s = hr._sampling(job)
    margins = [] if margins is None else margins
    samples, logits_out = [], []
    for sample in range(job.get("num_samples", 1)):
        rnd = [list(prompt[f * S:(f + 1) * S]) for f in range(n_ctx)]  # frames of S ids
        frames = []
        for g in range(num_frames):
            if len(rnd) == T:
                rnd = rnd[-overlap:]
            base = [t for frame in rnd for t in frame]
            tokens = []
            for t in range(P):
                logits = ref.token_logits(base + tokens)
                draw = g * P + t
                if sample == 0 and draw in logit_draws:
                    logits_out.append({"sample": sample, "draw_index": draw,
                                       "values": [float("%.8g" % v) for v in logits]})
                tokens.append(hr._draw(logits[:hi], s, sample, draw, margins))
            frames.append(tokens)
            if g + 1 < num_frames:
                rnd.append(tokens + list(acts[g]))
        samples.append({"sample": sample, "frames": frames})
    return samples, logits_out


def action_token_job(rng, cfg, job_id, num_frames, sampling, num_samples=1, n_ctx=3,
                     last_row=True):
    """Random context frames with their action ids in place, one action row per generated
    frame (the last left out unless last_row)."""
    P, A, _, hi = frame_layout(cfg)
    act = lambda: rng.integers(hi, cfg["vocab_size"], A).tolist()  # noqa: E731
    prompt = []
    for _ in range(n_ctx):
        prompt += rng.integers(0, hi, P).tolist() + act()
    rows = [act() for _ in range(num_frames if last_row else num_frames - 1)]
    return {"id": job_id, "prompt_token_ids": prompt, "action_token_ids": rows,
            "num_frames": num_frames, "sampling": sampling, "num_samples": num_samples}


def golden_cases(kind, cfg, seed):
    if kind != "action_tokens":
        return hr.golden_cases("llama", cfg, seed)
    rng = np.random.default_rng(seed + 1000)
    P = cfg["num_image_patches"]
    # Frame starts, the last slot of a frame, and the first frames of rounds 2 and 3.
    draws = [0, 1, P - 1, P, 3 * P - 1, 3 * P, 3 * P + 1, 6 * P - 1, 6 * P, 8 * P - 1]
    return [("greedy", action_token_job(rng, cfg, "greedy", 8, hr.GREEDY), draws),
            ("seeded", action_token_job(rng, cfg, "seeded", 8, hr.SEEDED, 2, last_row=False), ()),
            ("top_k_top_p", action_token_job(rng, cfg, "top_k_top_p", 8, hr.TOPKP, n_ctx=6), ())]


def generate(ref, kind, job, logit_draws=(), margins=None):
    if kind == "action_tokens":
        return generate_action_tokens(ref, job, logit_draws, margins)
    return hr.generate(ref, job, logit_draws, margins)


def compute_golden(ckpt_dir, kind, seed):
    ref = Reference(ckpt_dir, kind)
    golden = {"kind": kind, "seed": seed, "dtype": "f32",
              "made_by": "scripts/hf_families.py make --kind %s --seed %d" % (kind, seed),
              "cases": []}
    golden["cases"], low = hr.run_cases(
        golden_cases(kind, ref.config, seed),
        lambda job, draws, margins: generate(ref, kind, job, draws, margins))
    return golden, low


def cmd_make(args):
    t0 = time.time()
    make(args.kind, args.seed, args.out)
    golden, low = compute_golden(args.out, args.kind, args.seed)
    return hr.write_golden(args.out, golden, low, t0)


def cmd_check(args):
    with open(os.path.join(args.dir, "golden.json")) as f:
        want = json.load(f)
    got, _ = compute_golden(args.dir, want["kind"], want["seed"])
    ok = hr.same_golden(want, got)
    print("%s: %s" % (args.dir, "golden reproduced" if ok else "MISMATCH"))
    return 0 if ok else 1


def cmd_jobs(args):
    """Sample jobs for an action-token checkpoint: greedy and sampled, one with num_samples 2,
    one whose context fills a round."""
    with open(os.path.join(args.dir, "config.json")) as f:
        cfg = json.load(f)
    rng = np.random.default_rng(args.seed)
    name = os.path.basename(os.path.normpath(args.dir))
    plans = [("greedy", hr.GREEDY, 1, 4, 1), ("sampled", {**hr.SEEDED, "seed": 42}, 2, 7, 2),
             ("top_k", {"temperature": 1.0, "top_k": 50, "top_p": 1.0, "seed": 3}, 1, 10, 6),
             ("top_p", {"temperature": 0.7, "top_k": 0, "top_p": 0.8, "seed": 5}, 1, 2, 3)]
    with open(args.out, "w") as f:
        for i, (what, s, n, frames, ctx) in enumerate(plans):
            job = action_token_job(rng, cfg, "%s-%d-%s" % (name, i, what), frames, s, n,
                                   n_ctx=ctx, last_row=i % 2 == 0)
            f.write(json.dumps(job) + "\n")
    print("wrote", args.out)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="tiny random checkpoint + golden.json")
    m.add_argument("--kind", choices=KINDS, required=True)
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--out", required=True)
    c = sub.add_parser("check", help="recompute a golden.json and compare")
    c.add_argument("--dir", required=True)
    j = sub.add_parser("jobs", help="sample jobs JSONL for an action-token checkpoint")
    j.add_argument("--dir", required=True)
    j.add_argument("--out", required=True)
    j.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    torch.manual_seed(0)
    return {"make": cmd_make, "check": cmd_check, "jobs": cmd_jobs}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
