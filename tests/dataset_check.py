#!/usr/bin/env python3
"""Reads a `loom run --tokens-out DIR` dataset the way the README shows and compares every
sample with the results JSONL of the same run.

    python tests/dataset_check.py DIR results.jsonl

Exit 0 when every record's tokens equal its dataset sample (and no sample is extra), 1 with
one line per difference otherwise.
"""
import json
import sys

import numpy as np
from safetensors.numpy import load_file


def load_sample(root, entry, cache={}):
    # The README snippet: the manifest line names the file and the rows of the sample.
    path = f"{root}/{entry['file']}"
    if path not in cache:
        cache[path] = load_file(path)
    t = cache[path]
    begin, end = entry["rows"]
    return t["tokens"][begin:end], t.get("actions", np.zeros(0))[begin:end]


def main(root, results):
    manifest = [json.loads(line) for line in open(f"{root}/manifest.jsonl")]
    info = json.load(open(f"{root}/dataset.json"))
    errors = []
    by_key = {(str(e["id"]), e["sample"]): e for e in manifest}
    if len(by_key) != len(manifest):
        errors.append("duplicate (id, sample) in the manifest")
    if info["totals"]["samples"] != len(manifest):
        errors.append(f"dataset.json totals {info['totals']['samples']} != {len(manifest)} lines")
    seen = 0
    for line in open(results):
        r = json.loads(line)
        if r["status"] != "ok":
            continue
        seen += 1
        entry = by_key.get((str(r["id"]), r["sample"]))
        if entry is None:
            errors.append(f"{r['id']} sample {r['sample']}: not in the manifest")
            continue
        tokens, actions = load_sample(root, entry)
        want = np.array(r["frames"] if "frames" in r else r["tokens"], dtype=np.int32)
        if tokens.dtype != np.int32 or tokens.shape != want.shape or not (tokens == want).all():
            errors.append(f"{r['id']} sample {r['sample']}: tokens differ")
        if info["frames"] and actions.shape != (len(want), info["action_tokens"], info["action_dim"]):
            errors.append(f"{r['id']} sample {r['sample']}: actions shape {actions.shape}")
    if seen != len(manifest):
        errors.append(f"{seen} ok records, {len(manifest)} manifest lines")
    for e in errors:
        print("dataset_check:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
