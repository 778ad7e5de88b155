#!/usr/bin/env python3
"""HF transformers on a GPU running loom's exact frame loop, for the side-by-side benchmark
(scripts/bench_hf.sh, issue 3 §8 and issue 4 §4).

    python3 scripts/hf_bench.py --model DIR --mode eager   --batch 1 --frames 1 --json eager.json
    python3 scripts/hf_bench.py --model DIR --mode compile --batch 1 --frames 2 --json compile.json
    python3 scripts/hf_bench.py --model testdata/tiny_v1 --check --json check.json     # correctness

The checkpoint (Terra v1 or V2 layout) becomes transformers' own LlamaForCausalLM (model.* and
lm_head.weight) plus plain tensors for the positional tables and the action projection, loaded
with safetensors straight onto the device; the model is built with weight init skipped
(scripts/hf_frame_model.py: the model and its two caches).

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
import json
import os
import platform
import shlex
import statistics
import sys
import time
import traceback

import torch

from hf_frame_model import DynamicCacheHandle, FrameModel, StaticCacheHandle, log

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32, "f16": torch.float16}


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
            margins.append(min(x for x, _ in m))  # greedy: no order margin
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
