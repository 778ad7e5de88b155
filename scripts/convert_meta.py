#!/usr/bin/env python3
"""Meta/Mistral-format Llama checkpoints for loom's models/llama_meta.json (issue 12 §4).

    python scripts/convert_meta.py pth --dir META_DIR
        consolidated.00.pth (one shard) → META_DIR/model.safetensors; loom reads safetensors
        only, never pickles. params.json stays as it is.
    python scripts/convert_meta.py from-hf --hf testdata/tiny_llama --out testdata/tiny_llama_meta
        an HF LlamaForCausalLM directory (one model.safetensors, or shards by their index) renamed to Meta's names with Meta's interleaved rotary
        rows in wq / wk (the inverse of transformers' convert_llama_weights_to_hf.py permute)
        and a params.json; loom must give the HF copy's tokens from it.
"""

import argparse
import json
import os

import torch
from safetensors.torch import load_file, save_file


def unpermute(w, n_heads):
    """HF half-split rotary rows → Meta interleaved (inverse of HF's permute)."""
    rows, cols = w.shape
    return w.view(n_heads, 2, rows // n_heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def load_hf_weights(folder):
    """Every tensor of an HF folder: its shards by model.safetensors.index.json (as HF reads
    it, the index first), else model.safetensors."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.exists(index):
        return load_file(os.path.join(folder, "model.safetensors"))
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    t = {}
    for shard in sorted(set(weight_map.values())):
        t.update(load_file(os.path.join(folder, shard)))
    missing = sorted(set(weight_map) - set(t))
    if missing:
        raise SystemExit("%s: the index names %d tensors no shard holds (first %s)"
                         % (index, len(missing), missing[0]))
    return t


def cmd_from_hf(args):
    with open(os.path.join(args.hf, "config.json")) as f:
        c = json.load(f)
    t = load_hf_weights(args.hf)
    h, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    out = {"tok_embeddings.weight": t["model.embed_tokens.weight"],
           "norm.weight": t["model.norm.weight"],
           "output.weight": t.get("lm_head.weight", t["model.embed_tokens.weight"]).clone()}
    for i in range(c["num_hidden_layers"]):
        p, q = "model.layers.%d." % i, "layers.%d." % i
        out[q + "attention_norm.weight"] = t[p + "input_layernorm.weight"]
        out[q + "ffn_norm.weight"] = t[p + "post_attention_layernorm.weight"]
        out[q + "attention.wq.weight"] = unpermute(t[p + "self_attn.q_proj.weight"], h)
        out[q + "attention.wk.weight"] = unpermute(t[p + "self_attn.k_proj.weight"], kv)
        out[q + "attention.wv.weight"] = t[p + "self_attn.v_proj.weight"]
        out[q + "attention.wo.weight"] = t[p + "self_attn.o_proj.weight"]
        out[q + "feed_forward.w1.weight"] = t[p + "mlp.gate_proj.weight"]
        out[q + "feed_forward.w3.weight"] = t[p + "mlp.up_proj.weight"]
        out[q + "feed_forward.w2.weight"] = t[p + "mlp.down_proj.weight"]
    params = {"dim": c["hidden_size"], "n_layers": c["num_hidden_layers"], "n_heads": h,
              "n_kv_heads": kv, "vocab_size": c["vocab_size"], "multiple_of": 32,
              "norm_eps": c["rms_norm_eps"], "rope_theta": c.get("rope_theta", 10000.0),
              "max_seq_len": c["max_position_embeddings"],
              # not Meta's keys, but the ids loom's jobs stop on (Meta keeps them in the tokenizer)
              "bos_token_id": c.get("bos_token_id"), "eos_token_id": c.get("eos_token_id")}
    os.makedirs(args.out, exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(args.out, "model.safetensors"))
    with open(os.path.join(args.out, "params.json"), "w") as f:
        json.dump(params, f, indent=1)
    print("wrote", args.out)


def cmd_pth(args):
    shards = sorted(f for f in os.listdir(args.dir) if f.endswith(".pth"))
    if len(shards) != 1:
        raise SystemExit("%s: expected one consolidated.*.pth, found %s (merge model-parallel "
                         "shards first)" % (args.dir, shards))
    sd = torch.load(os.path.join(args.dir, shards[0]), map_location="cpu", weights_only=True)
    sd = {k: v.contiguous() for k, v in sd.items() if not k.endswith("rope.freqs")}
    save_file(sd, os.path.join(args.dir, "model.safetensors"))
    print("wrote", os.path.join(args.dir, "model.safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("from-hf")
    a.add_argument("--hf", required=True)
    a.add_argument("--out", required=True)
    b = sub.add_parser("pth")
    b.add_argument("--dir", required=True)
    args = ap.parse_args()
    {"from-hf": cmd_from_hf, "pth": cmd_pth}[args.cmd](args)


if __name__ == "__main__":
    main()
