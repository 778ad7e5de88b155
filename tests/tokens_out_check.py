#!/usr/bin/env python3
"""Checks `loom run --tokens-out DIR` against the results JSONL it wrote beside it.

    python tests/tokens_out_check.py DIR results.jsonl

For every "ok" record: DIR/<file id>.sample-<k>.safetensors exists under the name loom's
tokens_file_id() gives (re-derived here, so C++ and Python must agree), loads with
safetensors.numpy.load_file (and safetensors.torch when torch is importable) as one int32
tensor "tokens" of shape [frames, tokens_per_frame] ([1, n] for plain models) equal to the
record's frames/tokens, and carries metadata id, sample, seed, model. No other .safetensors
file may be in DIR. Exit 0 when all hold, 1 with one line per failure otherwise.
"""
import json
import os
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

MAX_FILE_ID_CHARS = 120  # tokens_out.h kMaxFileIdChars


def fnv1a32(data: bytes) -> int:
    h = 1469598103934665603
    for c in data:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h & 0xFFFFFFFF


def file_id(job_id: str) -> str:
    raw = job_id.encode("utf-8")
    keep = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
    out = bytearray()
    changed = False
    for i, c in enumerate(raw):
        ok = c in keep and not (i == 0 and c == ord("."))
        out.append(c if ok else ord("_"))
        changed |= not ok
    if len(out) > MAX_FILE_ID_CHARS:
        del out[MAX_FILE_ID_CHARS:]
        changed = True
    name = out.decode("ascii")
    if changed:
        name += "-%08x" % fnv1a32(raw)
    return name


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out_dir, results = sys.argv[1], sys.argv[2]
    try:
        import torch  # noqa: F401
        from safetensors.torch import load_file as load_torch
    except ImportError:
        load_torch = None

    failures, checked, expected_files = [], 0, set()
    with open(results, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            rec = json.loads(line)
            if rec.get("status") != "ok":
                continue
            name = "%s.sample-%d.safetensors" % (file_id(rec["id"]), rec["sample"])
            expected_files.add(name)
            path = os.path.join(out_dir, name)
            where = "%s line %d (id %r sample %d)" % (results, n, rec["id"], rec["sample"])
            if not os.path.isfile(path):
                failures.append("%s: expected %s, found no such file" % (where, path))
                continue
            want = np.array(rec["frames"] if "frames" in rec else [rec["tokens"]], dtype=np.int32)
            if want.ndim != 2:  # zero frames: numpy sees [] as shape (0,)
                want = want.reshape(0, 0)
            got = load_file(path)
            if set(got) != {"tokens"}:
                failures.append("%s: expected one tensor 'tokens', found %s" % (path, sorted(got)))
                continue
            t = got["tokens"]
            if t.dtype != np.int32 or t.shape != want.shape or not np.array_equal(t, want):
                failures.append("%s: expected int32 %s equal to the JSONL, found %s %s"
                                % (path, list(want.shape), t.dtype, list(t.shape)))
                continue
            if load_torch is not None:
                tt = load_torch(path)["tokens"]
                if str(tt.dtype) != "torch.int32" or not np.array_equal(tt.numpy(), want):
                    failures.append("%s: torch loads %s %s" % (path, tt.dtype, list(tt.shape)))
            with safe_open(path, "np") as sf:
                meta = sf.metadata() or {}
            if meta.get("id") != rec["id"] or meta.get("sample") != str(rec["sample"]):
                failures.append("%s: expected metadata id %r sample %r, found %r"
                                % (path, rec["id"], str(rec["sample"]), meta))
            for key in ("seed", "model"):
                if key not in meta:
                    failures.append("%s: expected metadata %r, found %r" % (path, key, meta))
            checked += 1
    stray = sorted(set(x for x in os.listdir(out_dir) if x.endswith(".safetensors"))
                   - expected_files)
    for s in stray:
        failures.append("%s: expected no file without an ok record, found %s" % (out_dir, s))
    for msg in failures:
        print("tokens_out_check: " + msg, file=sys.stderr)
    print("tokens_out_check: %d files checked%s, %d failures"
          % (checked, " (numpy and torch)" if load_torch else " (numpy)", len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
