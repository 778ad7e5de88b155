#!/usr/bin/env python3
"""Random-weight checkpoints of Terra's exact shape, in seconds, with numpy only.

    python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra_v1            # 4.09 GB
    python3 scripts/make_checkpoint.py --variant v2 --out /tmp/terra_v2 --layers 2
    python3 scripts/make_checkpoint.py --selftest

Writes what the Hugging Face hub ships for turing-motors/Terra world_model (v1) or
world_model_v2 (V2): its config.json (every key, OPT leftovers included), bf16 tensors under
the same names and shapes in 7 shards `model-0000i-of-00007.safetensors`, split the way
transformers' save_pretrained(max_shard_size="500MB") splits them (embeddings alone, the 22
layers over 4 shards, lm_head alone, the positional tables and action projection last), and
`model.safetensors.index.json` with metadata.total_size. --layers N keeps the Terra widths
with fewer layers (config says N); the shard count then follows from the same 500 MB rule.

Speed: the random values are one pool of 32M bf16 normals (std 0.02) plus a small pool near 1
for the norm weights, drawn once; each tensor is streamed from a random offset of its pool
(wrapping) straight into the file with file.write(memoryview), so the cost is the disk.

Only numpy and json are needed (torch/safetensors are used by --selftest when present), so it
runs on any machine with a Python, whatever its torch and transformers versions. The
safetensors writer here is also what scripts/hf_reference.py uses for the tiny checkpoints.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

_ST_DTYPE = {"bf16": "BF16", "f16": "F16", "f32": "F32"}
_ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4}


# ---------------------------------------------------------------------------------------------
# safetensors writing (format: u64 little-endian header length, JSON header, raw tensor bytes)


def f32_to_bf16_bits(x):
    """float32 array → bf16 bit patterns (uint16), round to nearest even like torch."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(x)
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def encode(x, dtype):
    """float array → (safetensors dtype, little-endian bytes-like array) for bf16/f16/f32."""
    st = _ST_DTYPE[dtype]
    if st == "BF16":
        return st, f32_to_bf16_bits(x).astype("<u2")
    if st == "F16":
        return st, np.ascontiguousarray(x, dtype="<f2")
    return st, np.ascontiguousarray(x, dtype="<f4")


class Entry:
    """One tensor to write: name, safetensors dtype, shape, and how to produce its bytes.

    `chunks` is a callable returning an iterable of buffers whose bytes, in order, are the
    tensor's data (so a 1 GB table can be streamed from a pool without being built).
    """

    def __init__(self, name, dtype, shape, chunks):
        self.name, self.dtype, self.shape = name, dtype, [int(s) for s in shape]
        self.chunks = chunks

    @property
    def nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * _ITEMSIZE[self.dtype]

    @staticmethod
    def from_array(name, dtype, array):
        st, data = encode(array, dtype)
        return Entry(name, st, data.shape, lambda: [memoryview(data).cast("B")])


def write_safetensors(path, entries, metadata=None):
    """Writes one .safetensors file; tensors laid out in name order as safetensors does."""
    entries = sorted(entries, key=lambda e: e.name)
    header = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for e in entries:
        header[e.name] = {"dtype": e.dtype, "shape": e.shape,
                          "data_offsets": [offset, offset + e.nbytes]}
        offset += e.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, padded with spaces
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for e in entries:
            written = 0
            for chunk in e.chunks():
                written += f.write(chunk)
            if written != e.nbytes:
                raise RuntimeError("%s: wrote %d bytes, expected %d" % (e.name, written, e.nbytes))
    return offset


def plan_shards_hf(entries, max_shard_bytes):
    """transformers' shard_checkpoint rule: start a new shard when the next tensor would pass
    the limit and the current shard is not empty (so an over-limit tensor sits alone)."""
    shards, size = [[]], 0
    for e in entries:
        if size + e.nbytes > max_shard_bytes and shards[-1]:
            shards.append([])
            size = 0
        shards[-1].append(e)
        size += e.nbytes
    return shards


def plan_shards_even(entries, count):
    """Splits tensors, in order, into `count` shards of about equal bytes (tiny checkpoints)."""
    total = sum(e.nbytes for e in entries)
    shards, before = [[] for _ in range(count)], 0
    for e in entries:
        shards[min(count - 1, int(count * (before + e.nbytes / 2) / total))].append(e)
        before += e.nbytes
    if any(not s for s in shards):
        raise ValueError("cannot split %d tensors into %d non-empty shards" % (len(entries), count))
    return shards


def write_checkpoint(out_dir, config, shards):
    """config.json + one model.safetensors, or shards + model.safetensors.index.json as HF does."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    if len(shards) == 1:
        return write_safetensors(os.path.join(out_dir, "model.safetensors"), shards[0])
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        total += write_safetensors(os.path.join(out_dir, name), shard)
        for e in shard:
            weight_map[e.name] = name
    index = {"metadata": {"total_size": total},
             "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return total


# ---------------------------------------------------------------------------------------------
# Terra (huggingface.co/turing-motors/Terra world_model / world_model_v2 config.json)

TERRA_V1_ARCH, TERRA_V2_ARCH = "LlamaActionForCausalLM", "LlamaActionV2ForCausalLM"


def terra_config(variant, layers=22):
    c = {
        "action_dim": 3,
        "activation_function": "relu",
        "architectures": [TERRA_V1_ARCH if variant == "v1" else TERRA_V2_ARCH],
        "auto_map": {
            "AutoConfig": "configuration_llama_action.LlamaActionConfig",
            "AutoModel": "modeling_llama_action." +
                         (TERRA_V1_ARCH if variant == "v1" else TERRA_V2_ARCH),
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 262144,
        "do_layer_norm_before": True,
        "dropout": 0.1,
        "enable_bias": True,
        "eos_token_id": 262144,
        "hidden_act": "silu",
        "hidden_size": 2048,
        "init_std": 0.02,
        "initializer_range": 0.02,
        "intermediate_size": 5632,
        "layer_norm_elementwise_affine": True,
        "layerdrop": 0.0,
        "llm_model_type": "llama",
        "max_position_embeddings": 14550,
        "model_type": "llama_action",
        "num_action_embeddings": 6,
        "num_action_tokens": 6,
        "num_attention_heads": 32,
        "num_hidden_layers": layers,
        "num_image_patches": 576,
        "num_key_value_heads": 4,
        "num_spatio_embeddings": 582,
        "num_temporal_embeddings": 25,
        "pad_token_id": 262144,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.39.3",
        "use_cache": True,
        "use_text": False,
        "vocab_size": 262145,
        "word_embedding_proj_dim": 2048,
    }
    if variant == "v1":
        c = {"_name_or_path": "turing-motors/Terra", **c}
    else:  # world_model_v2's auto_map points into the repository root
        c["auto_map"] = {k: "turing-motors/Terra--" + v for k, v in c["auto_map"].items()}
    return c


def llama_action_shapes(config, variant):
    """[(name, shape, kind)] in the order HF's state_dict yields them; kind: 'norm' or 'weight'.

    This is the one place that spells the checkpoint layout (terra.md's table); the tiny
    checkpoints of scripts/hf_reference.py use it too.
    """
    h, inter = config["hidden_size"], config["intermediate_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    hd = h // heads
    vocab, adim = config["vocab_size"], config.get("action_dim", 0)
    out = [("model.embed_tokens.weight", [vocab, h], "weight")]
    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        out += [(p + "self_attn.q_proj.weight", [heads * hd, h], "weight"),
                (p + "self_attn.k_proj.weight", [kv * hd, h], "weight"),
                (p + "self_attn.v_proj.weight", [kv * hd, h], "weight"),
                (p + "self_attn.o_proj.weight", [h, heads * hd], "weight"),
                (p + "mlp.gate_proj.weight", [inter, h], "weight"),
                (p + "mlp.up_proj.weight", [inter, h], "weight"),
                (p + "mlp.down_proj.weight", [h, inter], "weight"),
                (p + "input_layernorm.weight", [h], "norm"),
                (p + "post_attention_layernorm.weight", [h], "norm")]
    out.append(("model.norm.weight", [h], "norm"))
    if not config.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", [vocab, h], "weight"))
    if variant == "llama":
        return out
    out += [("pos_embedding_spatio_temporal.spatio_embeddings.weight",
             [config["num_spatio_embeddings"], h], "weight"),
            ("pos_embedding_spatio_temporal.temporal_embeddings.weight",
             [config["num_temporal_embeddings"], h], "weight")]
    if variant == "v1":
        out += [("action_projection.weight", [h, adim], "weight"),
                ("action_projection.bias", [h], "weight")]
    else:
        for j, fan_in in ((0, adim), (2, h), (4, h)):
            out += [("action_projection.%d.weight" % j, [h, fan_in], "weight"),
                    ("action_projection.%d.bias" % j, [h], "weight")]
    return out


class Pool:
    """A ring of random bf16 values; a tensor is a window of it at a random offset."""

    def __init__(self, rng, size, mean, std):
        self.bits = f32_to_bf16_bits(rng.standard_normal(size, dtype=np.float32) * np.float32(std)
                                     + np.float32(mean)).astype("<u2")
        self.rng = rng

    def chunks(self, count):
        def gen():
            n = self.bits.size
            pos = int(self.rng.integers(0, n))
            left = count
            while left > 0:
                take = min(left, n - pos)
                yield memoryview(self.bits[pos:pos + take]).cast("B")
                left -= take
                pos = 0
        return gen


def make_terra(variant, out_dir, layers=22, seed=0, max_shard_bytes=500 * 10**6,
               pool_size=32 << 20):
    config = terra_config(variant, layers)
    rng = np.random.default_rng(seed)
    weights = Pool(rng, pool_size, 0.0, 0.02)
    norms = Pool(rng, 1 << 16, 1.0, 0.02)
    entries = []
    for name, shape, kind in llama_action_shapes(config, variant):
        count = int(np.prod(shape, dtype=np.int64))
        pool = norms if kind == "norm" else weights
        entries.append(Entry(name, "BF16", shape, pool.chunks(count)))
    params = sum(int(np.prod(e.shape, dtype=np.int64)) for e in entries)
    if variant == "v1" and layers == 22:
        # terra.md: the published checkpoint has exactly these.
        assert len(entries) == 205, len(entries)
        assert params == 2_043_973_632, params
    shards = plan_shards_hf(entries, max_shard_bytes)
    total = write_checkpoint(out_dir, config, shards)
    return len(entries), params, total, [sum(e.nbytes for e in s) for s in shards]


# ---------------------------------------------------------------------------------------------
# self-check


def check_readable(out_dir):
    """Opens every shard with safetensors.safe_open and checks names, dtypes, shapes, index.

    numpy cannot hold bf16, so for bf16 the numpy framework checks the header (dtype, shape)
    and torch, when present, reads one tensor's values.
    """
    from safetensors import safe_open
    index_path = os.path.join(out_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
        files = sorted(set(index["weight_map"].values()))
    else:
        index, files = None, ["model.safetensors"]
    seen, total = {}, 0
    for fn in files:
        with safe_open(os.path.join(out_dir, fn), framework="np") as f:
            for k in f.keys():
                sl = f.get_slice(k)
                seen[k] = (sl.get_dtype(), list(sl.get_shape()), fn)
                total += int(np.prod(sl.get_shape(), dtype=np.int64)) * _ITEMSIZE[sl.get_dtype()]
                if sl.get_dtype() != "BF16":
                    assert np.all(np.isfinite(f.get_tensor(k)))
    if index is not None:
        assert index["metadata"]["total_size"] == total, (index["metadata"]["total_size"], total)
        assert {k: v[2] for k, v in seen.items()} == index["weight_map"]
    return seen, total


def selftest():
    import tempfile
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for variant in ("v1", "v2"):
            out = os.path.join(d, variant)
            t0 = time.time()
            n, params, total, sizes = make_terra(variant, out, layers=2, seed=1)
            seen, disk_total = check_readable(out)
            want = llama_action_shapes(terra_config(variant, 2), variant)
            good = (disk_total == total and
                    {k: ("BF16", s) for k, s, _ in want} == {k: v[:2] for k, v in seen.items()})
            try:
                import torch  # noqa: F401
                from safetensors import safe_open
                with safe_open(os.path.join(out, "model-00001-of-%05d.safetensors" % len(sizes)),
                               framework="pt") as f:
                    w = f.get_tensor("model.embed_tokens.weight").float()
                good &= abs(float(w.std()) - 0.02) < 0.002 and abs(float(w.mean())) < 0.002
            except ImportError:
                pass
            print("%s --layers 2: %d tensors, %d params, %d shards %s, %.1f s: %s" % (
                variant, n, params, len(sizes), sizes, time.time() - t0, "ok" if good else "BAD"))
            ok &= good
    # Full-size bookkeeping without writing: tensor and parameter counts, shard split.
    for variant, want_n, want_p in (("v1", 205, 2_043_973_632), ("v2", 209, 2_052_366_336)):
        shapes = llama_action_shapes(terra_config(variant), variant)
        p = sum(int(np.prod(s)) for _, s, _ in shapes)
        sizes = [sum(e.nbytes for e in s) for s in plan_shards_hf(
            [Entry(k, "BF16", s, None) for k, s, _ in shapes], 500 * 10**6)]
        good = len(shapes) == want_n and p == want_p and len(sizes) == 7
        print("%s full: %d tensors, %d params, shards (MB) %s: %s" % (
            variant, len(shapes), p, [round(s / 1e6, 1) for s in sizes], "ok" if good else "BAD"))
        ok &= good
    print("selftest", "passed" if ok else "FAILED")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", choices=["v1", "v2"], default="v1")
    ap.add_argument("--out", help="checkpoint directory to write")
    ap.add_argument("--layers", type=int, default=22, help="decoder layers (Terra: 22)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="re-open the result with safetensors")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        sys.exit(0 if selftest() else 1)
    if not args.out:
        ap.error("--out is required")
    t0 = time.time()
    n, params, total, sizes = make_terra(args.variant, args.out, args.layers, args.seed)
    dt = time.time() - t0
    print("wrote %s: %s, %d layers, %d tensors, %d parameters, %.2f GB in %d shards, "
          "%.1f s (%.2f GB/s)" % (args.out, args.variant, args.layers, n, params, total / 1e9,
                                  len(sizes), dt, total / 1e9 / max(dt, 1e-9)))
    if args.check:
        t0 = time.time()
        seen, _ = check_readable(args.out)
        print("safe_open: %d tensors readable, %.1f s" % (len(seen), time.time() - t0))


if __name__ == "__main__":
    main()
