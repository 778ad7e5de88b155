"""transformers' LlamaForCausalLM built from a loom frame-model checkpoint (Terra v1 or V2) with
its positional tables and action projection as plain tensors, and the two KV caches the frame
loop runs on; used by scripts/hf_bench.py (which documents the loop and the modes)."""

import contextlib
import inspect
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

from hf_reference import FRAME_ARCHS, llama_config_fields, shard_files


def log(*args):
    print("[hf_bench]", *args, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Building the model without paying for random init


@contextlib.contextmanager
def _skip_init():
    """Makes torch.nn.init.* and transformers' _init_weights no-ops while a model is built
    (every weight is overwritten from the checkpoint; a 262k×2048 random init takes seconds)."""
    import transformers
    saved = []

    def patch(owner, name, value):
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def keep(tensor, *args, **kwargs):
        return tensor

    for name in ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
                 "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
                 "kaiming_normal_", "orthogonal_", "sparse_"):
        if name in torch.nn.init.__dict__:
            patch(torch.nn.init, name, keep)
    from transformers import LlamaForCausalLM
    for cls in LlamaForCausalLM.__mro__:
        if "_init_weights" in cls.__dict__:
            patch(cls, "_init_weights", lambda self, module: None)
    del transformers
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


@contextlib.contextmanager
def _build_defaults(device, dtype):
    """New tensors default to `dtype` on `device` (torch ≥ 2.0); on older torch only the dtype,
    and the caller moves the model afterwards."""
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
    except TypeError:  # very old torch: no bf16 default
        pass
    try:
        try:
            ctx = torch.device(device)
            ctx.__enter__()
        except (AttributeError, TypeError):
            ctx = None
        try:
            yield ctx is not None
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
    finally:
        torch.set_default_dtype(old)


def _llama_config(cfg, attn):
    """transformers.LlamaConfig with the checkpoint's hyper-parameters (4.x or 5.x keywords)."""
    from transformers import LlamaConfig
    theta = float(cfg.get("rope_theta", 10000.0))
    params = inspect.signature(LlamaConfig.__init__).parameters
    kw = dict(llama_config_fields(cfg), tie_word_embeddings=False, use_cache=True,
              attn_implementation=attn)
    if "rope_parameters" in params:  # transformers ≥ 5
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    else:
        kw["rope_theta"] = theta
    hf = LlamaConfig(**kw)
    try:
        hf._attn_implementation = attn
    except Exception as e:  # a read-only property in some version: the keyword above did it
        log("note: config._attn_implementation is not settable (%s)" % e)
    return hf, theta


def read_shards(ckpt_dir, device):
    """{name: tensor on device} for model.safetensors or every shard named by the index."""
    from safetensors.torch import load_file
    out = {}
    for fn in shard_files(ckpt_dir):
        path = os.path.join(ckpt_dir, fn)
        try:
            part = load_file(path, device=str(device))
        except TypeError:  # old safetensors without device=
            part = {k: v.to(device) for k, v in load_file(path).items()}
        out.update(part)
    return out


class FrameModel:
    """A frame-model checkpoint as HF LlamaForCausalLM + loom's slot inputs, on one device."""

    def __init__(self, ckpt_dir, device, dtype, attn):
        from transformers import LlamaForCausalLM
        t0 = time.perf_counter()
        with open(os.path.join(ckpt_dir, "config.json")) as f:
            cfg = json.load(f)
        self.cfg = cfg
        self.kind = FRAME_ARCHS.get(cfg["architectures"][0])
        if self.kind is None:
            raise ValueError("%s: architecture %s is not a frame model (expected one of %s)" % (
                ckpt_dir, cfg["architectures"][0], sorted(FRAME_ARCHS)))
        self.device, self.dtype = torch.device(device), dtype
        self.P, self.A = cfg["num_image_patches"], cfg["num_action_tokens"]
        self.S, self.T = self.P + self.A, cfg["num_temporal_embeddings"]
        self.adim, self.H, self.vocab = cfg["action_dim"], cfg["hidden_size"], cfg["vocab_size"]
        if cfg["num_spatio_embeddings"] != self.S:
            raise ValueError("num_spatio_embeddings %d != P + A = %d" % (
                cfg["num_spatio_embeddings"], self.S))
        self.hf_config, theta = _llama_config(cfg, attn)
        with _skip_init(), _build_defaults(self.device, dtype) as on_device:
            model = LlamaForCausalLM(self.hf_config)
        if not on_device:
            model = model.to(self.device)
        self.model = model.eval()
        self.attn_implementation = getattr(self.model.config, "_attn_implementation", None)
        if self.attn_implementation != attn:
            raise RuntimeError("asked for attn_implementation=%r, the model uses %r" % (
                attn, self.attn_implementation))

        tensors = read_shards(ckpt_dir, self.device)
        llama_part = {k: v for k, v in tensors.items()
                      if k.startswith("model.") or k == "lm_head.weight"}
        missing, unexpected = self.model.load_state_dict(llama_part, strict=False)
        missing = [k for k in missing if not k.endswith("inv_freq")]
        if missing or unexpected:
            raise ValueError("%s: missing %s, unexpected %s" % (ckpt_dir, missing, unexpected))
        # RoPE tables are computed, not loaded (and init was skipped): make sure they are what
        # rope_theta says, rewriting any that a transformers version left to _init_weights.
        hd = self.H // cfg["num_attention_heads"]
        want = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        bufs = [(n, b) for n, b in self.model.named_buffers() if n.endswith("inv_freq")]
        if not bufs:
            raise RuntimeError("no rotary inv_freq buffer found in the HF model")
        self.rope_rewritten = []
        for name, buf in bufs:
            if buf.shape != want.shape or buf.dtype != torch.float32:
                raise RuntimeError("%s: %s %s, expected float32 [%d]" % (
                    name, buf.dtype, list(buf.shape), want.numel()))
            if not (buf.detach().double().cpu() - want).abs().max().item() <= 1e-6:
                with torch.no_grad():
                    buf.copy_(want.float())
                self.rope_rewritten.append(name)
        if self.rope_rewritten:
            log("note: rewrote RoPE buffers %s from rope_theta %g" % (self.rope_rewritten, theta))

        extra = {k: v.to(dtype) for k, v in tensors.items() if k not in llama_part}
        self.spatial = extra["pos_embedding_spatio_temporal.spatio_embeddings.weight"]   # [S, H]
        self.temporal = extra["pos_embedding_spatio_temporal.temporal_embeddings.weight"]  # [T, H]
        names = ["action_projection"] if self.kind == "v1" else [
            "action_projection.%d" % j for j in (0, 2, 4)]
        self.action_layers = [(extra[n + ".weight"], extra[n + ".bias"]) for n in names]
        used = set(llama_part) | {n + s for n in names for s in (".weight", ".bias")} | {
            "pos_embedding_spatio_temporal.spatio_embeddings.weight",
            "pos_embedding_spatio_temporal.temporal_embeddings.weight"}
        if set(tensors) - used:
            raise ValueError("%s: tensors nothing uses: %s" % (ckpt_dir, sorted(set(tensors) - used)))
        del tensors, llama_part, extra
        self.weight_bytes = sum(p.numel() * p.element_size() for p in self.model.parameters())
        self.positions = torch.arange(self.T * self.S, device=self.device)  # [T·S] slot ids
        # transformers ≤ 4.5x take cache_position (where the static cache writes); 5.x dropped
        # it: caches count their own length and position_ids drive the mask and RoPE.
        self.cache_position_arg = "cache_position" in inspect.signature(
            self.model.model.forward).parameters
        self.load_s = time.perf_counter() - t0

    # Slot inputs ------------------------------------------------------------------------------

    def action_inputs(self, rows):
        """rows [..., adim] float → [..., H] in the model dtype (v1 linear, V2 MLP)."""
        x = rows.to(self.dtype)
        for i, (w, b) in enumerate(self.action_layers):
            x = F.linear(x, w, b)
            if i + 1 < len(self.action_layers):
                x = torch.relu(x)
        return x

    def add_positions(self, x, p0):
        """x [B, n, H] slot inputs at flat positions p0.. → + spatial + temporal."""
        pos = self.positions[p0:p0 + x.shape[1]]
        return x + (self.spatial[pos % self.S] + self.temporal[pos // self.S])[None]

    def prompt_inputs(self, ids, actions):
        """ids [B, C, P] image ids, actions [B, C, A, adim] → [B, C·S, H] for slots 0.."""
        B, C = ids.shape[0], ids.shape[1]
        x = torch.cat([self.model.model.embed_tokens(ids), self.action_inputs(actions)], dim=2)
        return self.add_positions(x.reshape(B, C * self.S, self.H), 0)

    def chunk_inputs(self, tok, rows, p0):
        """tok [B, 1] the frame's last token, rows [B, A, adim] its action rows → [B, 1+A, H]."""
        x = torch.cat([self.model.model.embed_tokens(tok), self.action_inputs(rows)], dim=1)
        return self.add_positions(x, p0)

    # Forward passes ---------------------------------------------------------------------------

    def forward(self, x, p0, cache):
        """Runs slots [B, n, H] at positions p0..p0+n−1 → (last-slot logits [B, V] float32,
        the cache object to pass next time)."""
        return self._run(x, self.positions[p0:p0 + x.shape[1]], cache)

    def _run(self, x, pos, cache):
        kw = {"cache_position": pos} if self.cache_position_arg else {}
        out = self.model.model(inputs_embeds=x, position_ids=pos[None], past_key_values=cache,
                               use_cache=True, **kw)
        return self.model.lm_head(out.last_hidden_state[:, -1]).float(), out.past_key_values

    def decode_step(self, tok, pos, cache):
        """One single-slot step: tok [B, 1] int64 fed at flat position pos [1] int64 →
        (logits [B, V] float32, the cache object to pass next time)."""
        x = self.model.model.embed_tokens(tok) + (
            self.spatial[pos % self.S] + self.temporal[pos // self.S])[None]
        return self._run(x, pos, cache)

    def decode(self, tok, pos, cache):
        """decode_step's logits only: the function compile mode compiles (a static cache is
        updated in place, so nothing else needs to come out of the graph)."""
        return self.decode_step(tok, pos, cache)[0]


# ---------------------------------------------------------------------------------------------
# Caches (transformers 4.38–4.41 keep a static cache inside the attention layers; later
# versions take a StaticCache object whose constructor changed in 4.42 and again in 4.56+/5.x)


class DynamicCacheHandle:
    kind = "DynamicCache"

    def fresh(self):
        from transformers import DynamicCache
        return DynamicCache()

    def keep_returned(self):
        return True  # transformers 4.39 hands back a new (legacy) cache each call


class StaticCacheHandle:
    kind = "StaticCache"

    def __init__(self, fm, batch, length):
        from transformers import StaticCache
        self.fm, self.batch, self.length = fm, batch, length
        self.cache, self.layer_owned = None, False
        if hasattr(fm.model, "_setup_cache"):  # transformers ≤ 4.41
            fm.model._setup_cache(StaticCache, batch, length)
            self.layer_owned = True
            self.constructor = "model._setup_cache(StaticCache, %d, %d)" % (batch, length)
            return
        tries = [
            ("StaticCache(config=, max_batch_size=, max_cache_len=, device=, dtype=)",
             dict(config=fm.hf_config, max_batch_size=batch, max_cache_len=length,
                  device=fm.device, dtype=fm.dtype)),
            ("StaticCache(config=, max_cache_len=)",
             dict(config=fm.hf_config, max_cache_len=length)),
            ("StaticCache(config=, batch_size=, max_cache_len=, device=, dtype=)",
             dict(config=fm.hf_config, batch_size=batch, max_cache_len=length,
                  device=fm.device, dtype=fm.dtype)),
        ]
        errors = []
        for name, kw in tries:
            try:
                self.cache = StaticCache(**kw)
                self.constructor = name
                break
            except TypeError as e:
                errors.append("%s: %s" % (name, e))
        if self.cache is None:
            raise RuntimeError("no known StaticCache signature fits this transformers:\n  " +
                               "\n  ".join(errors))

    def fresh(self):
        """The cache to pass for a new sequence, reset in place (same addresses, so CUDA graphs
        recorded on it stay valid)."""
        if self.layer_owned:
            for layer in self.fm.model.model.layers:
                c = layer.self_attn.past_key_value
                if hasattr(c, "reset"):
                    c.reset()
                else:  # 4.38/4.39: no reset(); zero the tensors in place
                    c.key_cache.zero_()
                    c.value_cache.zero_()
            return None
        self.cache.reset()
        return self.cache

    def keep_returned(self):
        return False
