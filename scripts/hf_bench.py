#!/usr/bin/env python3
"""HF transformers on a GPU running loom's exact frame loop, for the side-by-side benchmark
(scripts/bench_hf.sh, issue 3 §8 and issue 4 §4).

    python3 scripts/hf_bench.py --model DIR --mode eager   --batch 1 --frames 1 --json eager.json
    python3 scripts/hf_bench.py --model DIR --mode compile --batch 1 --frames 2 --json compile.json
    python3 scripts/hf_bench.py --model testdata/tiny_v1 --check --json check.json     # correctness

The checkpoint (Terra v1 or V2 layout) becomes transformers' own LlamaForCausalLM (model.* and
lm_head.weight) plus plain tensors for the positional tables and the action projection, loaded
with safetensors straight onto the device; the model is built with weight init skipped.

B synthetic jobs run in lockstep (same lengths, no padding): C context frames of random image
ids and random action rows, then N frames generated with loom's frame loop (design.md §4):
  prefill  the C·S-slot prompt; its last logits give token 0 of frame 0;
  frame    P−1 single-slot decode steps (feed token t−1, sample token t), then one (1+A)-slot
           chunk: the frame's last token and its A action rows, whose last logits give token 0
           of the next frame; so every frame is exactly P forward passes;
  slot p   input = embed[token] or action_projection(action row), + spatial[p % S] +
           temporal[p // S]; position_ids = cache_position = p (RoPE inside HF's model).
Sampling: temperature 0.9, no top-k, top-p 1, torch.multinomial on the device (temperature 0:
argmax). HF's generate() cannot feed action slots, hence this loop.

Modes (details: bench/README.md):
  eager    attention per --attn (default "eager", the article's "HF eager"; "sdpa" too),
           DynamicCache, nothing compiled; warm-up = prefill + a few decode steps.
  compile  "HF at its best": StaticCache for the whole sequence + torch.compile of the
           single-slot decode step (embedding assembly + model + lm_head): reduce-overhead,
           fullgraph=True (CUDA graphs), falling back to fullgraph=False, mode "default",
           then backend "cudagraphs" (each failure reported). Prefill and (1+A)-slot chunks run uncompiled, as
           generate() runs its prefill. Warm-up = one whole frame (includes the compile:
           compile_s), then the cache is reset in place and N frames are timed. On torch
           without torch.compile the JSON says "compile unavailable: <reason>".

--check: the same cached loop, greedy and float32, on a small checkpoint (default
testdata/tiny_v1), two jobs in one batch, every token against scripts/hf_reference.py (the
uncached reference of loom's goldens; if it cannot run under this transformers, against an
uncached recompute through the same HF model, and the JSON says which).

Version-dependent calls (StaticCache's constructor, cache_position, rope_parameters) try the
known forms in turn; tested with torch 1.13 + transformers 4.39 and torch 2.11 + 5.17 (CPU).
"""

import argparse
import contextlib
import inspect
import json
import os
import platform
import shlex
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FRAME_ARCHS = {"LlamaActionForCausalLM": "v1", "LlamaActionV2ForCausalLM": "v2"}
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32, "f16": torch.float16}


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
    kw = dict(vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
              intermediate_size=cfg["intermediate_size"],
              num_hidden_layers=cfg["num_hidden_layers"],
              num_attention_heads=cfg["num_attention_heads"],
              num_key_value_heads=cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
              hidden_act=cfg.get("hidden_act", "silu"),
              max_position_embeddings=cfg["max_position_embeddings"],
              rms_norm_eps=cfg["rms_norm_eps"], tie_word_embeddings=False,
              attention_bias=False, bos_token_id=cfg.get("bos_token_id"),
              eos_token_id=cfg.get("eos_token_id"), pad_token_id=cfg.get("pad_token_id"),
              use_cache=True, attn_implementation=attn)
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
    index = os.path.join(ckpt_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for fn in files:
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


# ---------------------------------------------------------------------------------------------
# Timing


class Clock:
    """Marks on the device's stream (CUDA events) or host time (CPU)."""

    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"
        self.marks = []

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append(e)
        else:
            self.marks.append(time.perf_counter())

    def seconds(self):
        """Intervals between consecutive marks, in seconds (synchronizes)."""
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in zip(self.marks, self.marks[1:])]
        return [b - a for a, b in zip(self.marks, self.marks[1:])]


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


# ---------------------------------------------------------------------------------------------
# The frame loop


def sample(logits, temperature, generator):
    """logits [B, V] float32 → [B, 1] int64: argmax at temperature 0, else a multinomial draw
    from softmax(logits / temperature) over the whole vocabulary (top-k off, top-p 1)."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


def run_sequence(fm, cache_handle, decode_fn, ids, actions, n_frames, temperature, generator,
                 clock=None, max_decode_steps=None):
    """Prompt ids [B, C, P], action rows actions [B, C + n_frames, A, adim]; generates n_frames
    frames → tokens [B, n_frames_done, P] (int64, on the device). The clock gets a mark before
    the prefill, after the first token, and after each frame. max_decode_steps stops early
    (warm-up)."""
    C = ids.shape[1]
    cache = cache_handle.fresh()
    if clock:
        clock.mark()
    logits, returned = fm.forward(fm.prompt_inputs(ids, actions[:, :C]), 0, cache)
    if cache_handle.keep_returned():
        cache = returned
    tok = sample(logits, temperature, generator)
    if clock:
        clock.mark()
    p, steps, frames = C * fm.S, 0, []
    for f in range(n_frames):
        toks = [tok]
        for _ in range(1, fm.P):
            # a fresh [1] tensor each step (a fill kernel, no host copy), as HF's generate
            # advances cache_position; a view into fm.positions would change storage offset
            pos = torch.full((1,), p, dtype=torch.long, device=fm.device)
            logits, returned = decode_fn(tok, pos, cache)
            if cache_handle.keep_returned():
                cache = returned
            p += 1
            tok = sample(logits, temperature, generator)
            toks.append(tok)
            steps += 1
            if max_decode_steps is not None and steps >= max_decode_steps:
                return None
        logits, returned = fm.forward(fm.chunk_inputs(tok, actions[:, C + f], p), p, cache)
        if cache_handle.keep_returned():
            cache = returned
        p += 1 + fm.A
        tok = sample(logits, temperature, generator)
        frames.append(torch.cat(toks, dim=1))
        if clock:
            clock.mark()
    return torch.stack(frames, dim=1)


class Decoder:
    """The single-slot decode step as run: plain (eager mode, or compile unavailable) or
    torch.compile'd. The first few calls of a compiled step compile and record CUDA graphs; if
    one raises, the next configuration is tried on the same inputs and the error is kept for
    the JSON (a failure while recording may leave that step's slot written: this happens in
    warm-up, whose cache is reset before anything is timed or compared)."""

    # (mode, fullgraph, backend); the last needs no Triton or C compiler: dynamo + CUDA graphs
    CONFIGS = [("reduce-overhead", True, "inductor"), ("reduce-overhead", False, "inductor"),
               ("default", False, "inductor"), (None, True, "cudagraphs")]

    def __init__(self, fm, compile_mode):
        self.fm, self.fn = fm, None
        self.info = {"requested": compile_mode is not None, "used": None, "errors": []}
        self.calls, self.compile_s, self.pending = 0, None, []
        if compile_mode is None:
            return
        if not hasattr(torch, "compile"):
            self.info["unavailable"] = "compile unavailable: torch %s has no torch.compile" % (
                torch.__version__)
            log(self.info["unavailable"] + "; the static-cache loop runs uncompiled")
            return
        if compile_mode == "auto":
            self.pending = list(self.CONFIGS)
        elif compile_mode == "cudagraphs":
            self.pending = [self.CONFIGS[-1]]
        else:
            self.pending = [(compile_mode, compile_mode == "reduce-overhead", "inductor")]
        self._next()

    def _next(self):
        import torch._dynamo
        while self.pending:
            mode, fullgraph, backend = self.pending.pop(0)
            self.info["used"] = {"mode": mode, "fullgraph": fullgraph, "backend": backend}
            torch._dynamo.reset()
            try:
                self.fn = torch.compile(self.fm.decode, mode=mode, fullgraph=fullgraph,
                                        dynamic=False, backend=backend)
                return
            except Exception as e:  # noqa: BLE001 (a bad configuration: note it, go on)
                self._failed(e)
        raise RuntimeError("every torch.compile configuration failed:\n" +
                           "\n".join(self.info["errors"]))

    def _failed(self, e):
        msg = "%s: %s" % (self.info["used"], "".join(
            traceback.format_exception_only(type(e), e)).strip()[:2000])
        log("compile attempt failed:", msg)
        self.info["errors"].append(msg)

    def __call__(self, tok, pos, cache):
        """→ (logits [B, V] float32, the cache to pass next time)."""
        self.calls += 1
        if self.info["used"] is None:
            return self.fm.decode_step(tok, pos, cache)
        return self.compiled(tok, pos, cache), cache

    def compiled(self, tok, pos, cache):
        mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        if self.calls > 3:
            if mark:
                mark()
            return self.fn(tok, pos, cache)
        while True:
            t0 = time.perf_counter()
            try:
                if mark:
                    mark()
                out = self.fn(tok, pos, cache)
                sync(self.fm.device)
                # compile_s: the first three calls (trace + compile, CUDA-graph warm-up and
                # recording), i.e. everything a steady-state step does not pay again
                self.compile_s = (0.0 if self.calls == 1 else self.compile_s) + (
                    time.perf_counter() - t0)
                return out
            except Exception as e:  # noqa: BLE001 (any compile failure: report, try the next)
                self._failed(e)
                self._next()
                self.calls = 1


# ---------------------------------------------------------------------------------------------
# Benchmark


def synthetic_inputs(fm, batch, ctx, frames, seed, device):
    """Random prompt ids [B, C, P] in [0, vocab−1) and action rows [B, C + frames, A, adim]."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, fm.vocab - 1, (batch, ctx, fm.P), generator=g)
    actions = torch.rand((batch, ctx + frames, fm.A, fm.adim), generator=g) * 2 - 1
    return ids.to(device), actions.to(device)


def device_name(device):
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(torch.device(device))
    return "cpu: %s" % (platform.processor() or platform.machine())


def versions():
    import transformers
    v = {"torch": torch.__version__, "transformers": transformers.__version__,
         "python": platform.python_version()}
    try:
        import safetensors
        v["safetensors"] = safetensors.__version__
    except Exception:  # noqa: BLE001
        pass
    if torch.cuda.is_available():
        v["cuda"] = torch.version.cuda
    return v


def bench(args, result):
    device = args.device
    dtype = DTYPES[args.dtype]
    attn = args.attn or ("eager" if args.mode == "eager" else "sdpa")
    is_cuda = torch.device(device).type == "cuda"
    if is_cuda:
        torch.cuda.reset_peak_memory_stats()
    fm = FrameModel(args.model, device, dtype, attn)
    C, N, B = args.context_frames, args.frames, args.batch
    if C + N > fm.T:
        raise ValueError("context frames %d + frames %d > %d temporal positions" % (C, N, fm.T))
    log("loaded %s (%s, %.2f GB) in %.1f s on %s; attn %s" % (
        args.model, fm.kind, fm.weight_bytes / 1e9, fm.load_s, device_name(device),
        fm.attn_implementation))
    result.update(load_s=fm.load_s, weight_bytes=fm.weight_bytes, attn=fm.attn_implementation,
                  P=fm.P, A=fm.A, S=fm.S, variant=fm.kind, rope_rewritten=fm.rope_rewritten)
    length = (C + max(N, args.warmup_frames)) * fm.S
    if args.mode == "eager":
        handle = DynamicCacheHandle()
    else:
        handle = StaticCacheHandle(fm, B, length)
    result["cache"] = {"kind": handle.kind, "length": length if args.mode != "eager" else None,
                       "constructor": getattr(handle, "constructor", "DynamicCache()")}
    decoder = Decoder(fm, args.compile_mode if args.mode == "compile" else None)
    gen = torch.Generator(device=device).manual_seed(args.seed)

    with torch.no_grad():
        # Warm-up: kernels, allocator, cuBLAS handles; in compile mode also compile + graphs.
        ids, actions = synthetic_inputs(fm, B, C, max(N, args.warmup_frames), args.seed + 1,
                                        device)
        t0 = time.perf_counter()
        if args.warmup_frames > 0:
            run_sequence(fm, handle, decoder, ids, actions, args.warmup_frames, args.temperature,
                         gen)
        else:
            run_sequence(fm, handle, decoder, ids, actions, 1, args.temperature, gen,
                         max_decode_steps=args.warmup_steps)
        sync(device)
        result["warmup_s"] = time.perf_counter() - t0
        result["compile_s"] = decoder.compile_s
        result["compile"] = decoder.info
        log("warm-up %.1f s (compile %s)" % (result["warmup_s"], decoder.compile_s))

        suspect = None
        if decoder.info["used"] is not None:
            # The compiled step must compute what the plain one does: same prompt, same first
            # step, each on a freshly reset cache (a cache may count its own length, so one
            # slot cannot simply be written twice).
            def first_step(step):
                cache = handle.fresh()
                logits, _ = fm.forward(fm.prompt_inputs(ids, actions[:, :C]), 0, cache)
                tok = logits.argmax(-1, keepdim=True)
                pos = torch.full((1,), C * fm.S, dtype=torch.long, device=fm.device)
                return step(tok, pos, cache).clone()
            want = first_step(fm.decode)
            got = first_step(lambda *a: decoder(*a)[0])
            # relative L2 error of the logits: bf16 rounding differences between fused and
            # unfused kernels give ~1e-2; a wrong slot, position or stale cache gives O(1)
            err = ((got - want).norm() / want.norm()).item()
            result["compile"]["rel_err_vs_uncompiled"] = err
            result["compile"]["max_abs_err_vs_uncompiled"] = (got - want).abs().max().item()
            log("compiled vs uncompiled decode step: relative L2 error %.3g" % err)
            if not err < args.compile_tol:
                suspect = ("compiled decode step differs from the uncompiled one: relative L2 "
                           "logits error %.3g > %g" % (err, args.compile_tol))
                log("WARNING:", suspect)

        # Timed run.
        ids, actions = synthetic_inputs(fm, B, C, N, args.seed, device)
        if is_cuda:
            torch.cuda.reset_peak_memory_stats()
        clock = Clock(device)
        tokens = run_sequence(fm, handle, decoder, ids, actions, N, args.temperature, gen, clock)
        spans = clock.seconds()
    ttft, per_frame = spans[0], spans[1:]
    med = statistics.median(per_frame)
    if decoder.info["used"] is not None:
        try:  # graphs, recompiles, cudagraph skips: did the compiled step run as intended?
            from torch._dynamo.utils import counters
            result["compile"]["dynamo_counters"] = {
                k: {str(kk): vv for kk, vv in v.items()} for k, v in counters.items() if v}
        except Exception as e:  # noqa: BLE001
            result["compile"]["dynamo_counters"] = "unavailable: %s" % e
    if suspect:
        result["warning"] = suspect
    result.update(
        status="suspect" if suspect else "ok", ttft_s=ttft,
        s_per_frame={"median": med, "mean": statistics.mean(per_frame), "all": per_frame},
        tokens_per_s=B * fm.P / med, decode_steps_per_frame=fm.P,
        peak_bytes=torch.cuda.max_memory_allocated() if is_cuda else None,
        tokens_checksum=int(tokens.sum().item()))
    log("%s batch %d: %.3f s/frame (median of %d), ttft %.3f s, %.1f tokens/s" % (
        args.mode, B, med, len(per_frame), ttft, result["tokens_per_s"]))


# ---------------------------------------------------------------------------------------------
# Correctness check against scripts/hf_reference.py


def check(args, result):
    sys.path.insert(0, HERE)
    import numpy as np
    import hf_reference
    device = args.device
    if torch.device(device).type == "cuda":
        try:  # exact float32 matmuls (the default; set in case the environment changed it)
            torch.backends.cuda.matmul.allow_tf32 = False
        except Exception:  # noqa: BLE001
            pass
    attn = args.attn or ("eager" if args.mode == "eager" else "sdpa")
    fm = FrameModel(args.model, device, torch.float32, attn)
    C = args.context_frames
    N = min(args.frames, fm.T - C)
    rng = np.random.default_rng(args.seed)
    greedy = {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0}
    jobs = [hf_reference.frame_job(rng, fm.cfg, "check-%d" % i, N, greedy, n_ctx=C)
            for i in range(2)]
    ids = torch.tensor([[j["prompt_token_ids"][f * fm.S:f * fm.S + fm.P] for f in range(C)]
                        for j in jobs], device=device)                        # [2, C, P]
    actions = torch.tensor([j["actions"] for j in jobs], dtype=torch.float32,
                           device=device).reshape(2, C + N, fm.A, fm.adim)    # [2, C+N, A, adim]
    handle = (DynamicCacheHandle() if args.mode == "eager" else
              StaticCacheHandle(fm, 2, (C + N) * fm.S))
    decoder = Decoder(fm, args.compile_mode if args.mode == "compile" else None)
    with torch.no_grad():
        # A throw-away sequence first, as the benchmark warms up: the checked one then runs on
        # a reset (static) cache and already-compiled step, exactly as the timed run does.
        run_sequence(fm, handle, decoder, ids.flip(0), actions.flip(0), N, 0.0, None)
        got = run_sequence(fm, handle, decoder, ids, actions, N, 0.0, None).cpu().tolist()
    result.update(attn=fm.attn_implementation, cache={"kind": handle.kind},
                  compile=decoder.info, frames=N, batch=2)

    reference, margins, want = "scripts/hf_reference.py", [], []
    try:
        ref = hf_reference.Reference(args.model)
        for j in jobs:
            m = []
            want.append(hf_reference.generate_frames(ref, j, margins=m)[0][0]["frames"])
            margins.append(min(m))
    except Exception as e:  # noqa: BLE001 (reference broken on this version: say so, go on)
        reference = "uncached recompute through the same HF model (hf_reference failed: %s)" % (
            "".join(traceback.format_exception_only(type(e), e)).strip())
        log(reference)
        want = uncached_reference(fm, ids, actions, N)
    mismatches = []
    for b in range(2):
        for f in range(N):
            for t in range(fm.P):
                if got[b][f][t] != want[b][f][t]:
                    mismatches.append({"job": b, "frame": f, "token": t,
                                       "got": got[b][f][t], "want": want[b][f][t]})
    ok = not mismatches
    result.update(status="ok" if ok else "mismatch", check={
        "passed": ok, "reference": reference, "tokens_compared": 2 * N * fm.P,
        "min_margin": min(margins) if margins else None, "mismatches": mismatches[:10]})
    log("check (%s, %s): %s, %d tokens against %s" % (
        args.mode, handle.kind, "PASSED" if ok else "FAILED (%d differ)" % len(mismatches),
        2 * N * fm.P, reference))
    return ok


def uncached_reference(fm, ids, actions, n_frames):
    """Greedy frames recomputed from scratch every step (no cache) through the same model."""
    C = ids.shape[1]
    frames = []
    with torch.no_grad():
        x = fm.prompt_inputs(ids, actions[:, :C])
        for f in range(n_frames):
            toks = []
            for _ in range(fm.P):
                logits, _ = fm.forward(x, 0, None)
                tok = logits.argmax(-1, keepdim=True)
                toks.append(tok)
                step = fm.add_positions(fm.model.model.embed_tokens(tok), x.shape[1])
                x = torch.cat([x, step], dim=1)
            # the last token's slot is already in x; add this frame's action slots
            rows = fm.action_inputs(actions[:, C + f])
            x = torch.cat([x, fm.add_positions(rows, x.shape[1])], dim=1)
            frames.append(torch.cat(toks, dim=1))
    return torch.stack(frames, dim=1).cpu().tolist()


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="checkpoint directory (default with --check: testdata/tiny_v1)")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context-frames", type=int, default=3)
    ap.add_argument("--frames", type=int, default=1, help="timed frames")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--attn", choices=["eager", "sdpa"],
                    help="attention implementation (default: eager in eager mode, sdpa in "
                         "compile mode)")
    ap.add_argument("--compile-mode", default="auto",
                    help="auto (reduce-overhead+fullgraph, then fallbacks), a torch.compile "
                         "mode name, or cudagraphs (backend, no inductor)")
    ap.add_argument("--compile-tol", type=float, default=0.05,
                    help="max relative L2 logits error of the compiled decode step against "
                         "the uncompiled one; above it the run is marked \"suspect\"")
    ap.add_argument("--temperature", type=float, default=0.9)
    ap.add_argument("--warmup-frames", type=int, default=None,
                    help="whole warm-up frames (default: 1 in compile mode, 0 in eager mode)")
    ap.add_argument("--warmup-steps", type=int, default=8,
                    help="decode steps of warm-up when --warmup-frames is 0")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true",
                    help="greedy tokens of the cached loop (float32) against hf_reference.py")
    args = ap.parse_args()
    if args.warmup_frames is None:
        args.warmup_frames = 1 if args.mode == "compile" else 0
    if args.model is None:
        if not args.check:
            ap.error("--model is required")
        args.model = os.path.join(HERE, "..", "testdata", "tiny_v1")
    result = {"tool": "hf_bench", "mode": args.mode, "batch": args.batch if not args.check else 2,
              "context_frames": args.context_frames, "frames": args.frames,
              "dtype": "f32" if args.check else args.dtype, "model": args.model,
              "device": device_name(args.device), "versions": versions(),
              "temperature": 0.0 if args.check else args.temperature,
              "command": " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
              "status": "error"}
    code = 0
    try:
        if args.check:
            code = 0 if check(args, result) else 1
        else:
            bench(args, result)
    except Exception as e:  # noqa: BLE001 (the JSON must say what went wrong)
        result["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
        result["traceback"] = traceback.format_exc()[-6000:]
        log("FAILED:", result["error"])
        traceback.print_exc()
        code = 1
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    print(json.dumps({k: result.get(k) for k in (
        "status", "mode", "batch", "attn", "s_per_frame", "ttft_s", "tokens_per_s",
        "compile_s", "check", "error") if k in result}, default=str)[:3000])
    return code


if __name__ == "__main__":
    sys.exit(main())
