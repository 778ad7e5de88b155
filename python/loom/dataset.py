"""Reading a token dataset (`loom run --tokens-out DIR`, README "The token dataset").

The manifest is the index: one JSON line per sample naming its data file and rows. A merged
folder (`loom merge --dataset`) has manifest.jsonl; a sharded one before the merge has only
manifest.shard-K-of-N.jsonl files, which are read one after the other in shard order. Data
files are opened on first use and kept open (at most `max_open_files`); rows are sliced out
of them without reading the rest of the file.
"""
import collections
import hashlib
import json
import os
import re
import warnings

import numpy as np
from safetensors import safe_open

_SHARD_MANIFEST = re.compile(r"manifest\.shard-(\d+)-of-(\d+)\.jsonl$")
_SUMS = re.compile(r"SHA256SUMS(\.shard-\d+-of-\d+)?$")
_SUM_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *]?(.+)$")


def _slice(f, names, begin, end):
    """Rows [begin, end) of the first of `names` the file holds (float32 action rows, or
    int32 action ids for models whose actions are vocabulary tokens), else None."""
    for name in names:
        if name in f.keys():
            return f.get_slice(name)[begin:end]
    return None


def manifest_paths(root):
    """The manifest files of a dataset folder, in reading order."""
    merged = os.path.join(root, "manifest.jsonl")
    if os.path.exists(merged):
        return [merged]
    shards = []
    for name in os.listdir(root):
        m = _SHARD_MANIFEST.match(name)
        if m:
            shards.append((int(m.group(2)), int(m.group(1)), name))
    if not shards:
        raise FileNotFoundError(f"{root}: no manifest.jsonl or manifest.shard-K-of-N.jsonl; "
                                "is it a `loom run --tokens-out` folder?")
    counts = sorted({n for n, _, _ in shards})
    if len(counts) > 1:
        raise ValueError(f"{root}: manifests of runs with different shard counts {counts}; "
                         "remove the stale ones")
    return [os.path.join(root, name) for _, _, name in sorted(shards)]


def _unfinished(root, manifests):
    """'name: state' of each index (dataset.json beside a manifest) whose state is not
    complete: a run still writing, stopped, or a merge with --allow-partial."""
    out = []
    for path in manifests:
        name = "dataset" + os.path.basename(path)[len("manifest"):-len(".jsonl")] + ".json"
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                state = json.load(f).get("state")
        except (OSError, ValueError):
            continue
        if state != "complete":
            out.append(f"{name}: {state}")
    return out


def _lines(path):
    """(byte offset, line) of each complete non-blank line; a last line without its newline
    is one loom is still writing and is left out."""
    with open(path, "rb") as f:
        offset = 0
        for raw in f:
            if not raw.endswith(b"\n"):
                return
            if raw.strip():
                yield offset, raw
            offset += len(raw)


class Dataset:
    """`ds[i]` → (frames, actions, meta) for the i-th sample in manifest order: frames int32
    [F, P] (plain models: the generated tokens, int32 [n]), actions float32 [F, A, action_dim]
    (models whose actions are vocabulary tokens: the ids, int32 [F, A], -1 where none)
    (the rows after each frame, NaN where the job gave none; None for plain models or
    --no-dataset-actions), meta the sample's manifest line as a dict. `len(ds)`, iteration in
    manifest order, `ds.context(i)` for the prompt's frames. `len` and `ds[i]` use an index of
    the manifest taken at their first use; iteration reads the manifest as it is then."""

    def __init__(self, root, max_open_files=64):
        self.root = os.fspath(root)
        self.manifests = manifest_paths(self.root)
        self.max_open_files = max_open_files
        self._files = collections.OrderedDict()  # file name -> safe_open handle (LRU)
        self._index = None  # (manifest number, byte offset) per sample, built on first use
        # dataset.json beside manifest.jsonl, dataset.shard-K-of-N.json beside a shard's.
        name = os.path.basename(self.manifests[0])
        info = os.path.join(self.root, "dataset" + name[len("manifest"):-len(".jsonl")] + ".json")
        self.info = None
        if os.path.exists(info):
            with open(info, encoding="utf-8") as f:
                self.info = json.load(f)
        unfinished = _unfinished(self.root, self.manifests)
        if unfinished:
            warnings.warn(f"{self.root}: not a finished dataset ({', '.join(unfinished)}); "
                          "samples may be missing: finish the runs (loom run --resume) and "
                          "merge again (loom merge --dataset)", stacklevel=2)

    def entries(self):
        """The manifest lines as dicts, in order, read as they are needed."""
        for path in self.manifests:
            for _, raw in _lines(path):
                yield json.loads(raw)

    def __iter__(self):
        for entry in self.entries():
            yield self.read(entry)

    def __len__(self):
        return len(self._offsets()[0])

    def __getitem__(self, i):
        return self.read(self.entry(i))

    def entry(self, i):
        """The manifest line of sample i."""
        which, offsets = self._offsets()
        n = len(offsets)
        if not -n <= i < n:
            raise IndexError(f"sample {i} of a dataset of {n}")
        i %= n
        with open(self.manifests[which[i]], "rb") as f:
            f.seek(int(offsets[i]))
            return json.loads(f.readline())

    def read(self, entry):
        """(frames, actions, meta) of the sample a manifest line describes."""
        f = self._open(entry["file"])
        begin, end = entry["rows"]
        tokens = f.get_slice("tokens")[begin:end]
        actions = _slice(f, ("actions", "action_ids"), begin, end)
        return tokens, actions, entry

    def context(self, i):
        """(context, context_actions) of sample i: its prompt's frames int32 [n_ctx, P] (plain
        models: the prompt ids) and their action rows float32 [n_ctx, A, action_dim]; None
        for what the run left out (--no-dataset-context, --no-dataset-actions)."""
        entry = self.entry(i) if isinstance(i, int) else i
        f = self._open(entry["file"])
        keys = f.keys()
        if "context" not in keys:
            return None, None
        # The sample's position in its file, from the rows: samples are never empty.
        offsets = f.get_tensor("sample_offsets")
        begin, end = entry["rows"]
        k = int(np.searchsorted(offsets, begin, side="right")) - 1
        if not (0 <= k < len(offsets) - 1 and offsets[k] == begin and offsets[k + 1] == end):
            raise ValueError(f"{entry['file']}: rows {entry['rows']} are not a sample of it")
        c = f.get_tensor("context_offsets")
        context = f.get_slice("context")[int(c[k]):int(c[k + 1])]
        actions = _slice(f, ("context_actions", "context_action_ids"), int(c[k]), int(c[k + 1]))
        return context, actions

    def check_files(self):
        """Hashes every data file the manifests name and compares it with its SHA256SUMS line
        (what `loom verify` does for the bytes, without the loom binary: for a dataset copied
        to a machine that has none). Returns the problems, one string each; [] when every file
        is there with the bytes loom wrote. A dataset from loom 0.5.0 has no SHA256SUMS: then
        every file is a problem."""
        sums = {}
        for name in os.listdir(self.root):
            if not _SUMS.match(name):
                continue
            with open(os.path.join(self.root, name), encoding="utf-8", newline="") as f:
                for n, line in enumerate(f, 1):
                    m = _SUM_LINE.match(line.rstrip("\r\n"))
                    if m:
                        sums[m.group(2)] = m.group(1).lower()
        problems = []
        for name in sorted({e["file"] for e in self.entries()}):
            path = os.path.join(self.root, name)
            if not os.path.isfile(path):
                problems.append(f"{name}: missing")
                continue
            if name not in sums:
                problems.append(f"{name}: no line in SHA256SUMS")
                continue
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            if digest.hexdigest() != sums[name]:
                problems.append(f"{name}: SHA-256 {digest.hexdigest()}, SHA256SUMS says "
                                f"{sums[name]}: its bytes changed after loom wrote it")
        return problems

    def _offsets(self):
        if self._index is None:
            which, offsets = [], []
            for n, path in enumerate(self.manifests):
                for offset, _ in _lines(path):
                    which.append(n)
                    offsets.append(offset)
            self._index = (np.asarray(which, dtype=np.int32), np.asarray(offsets, dtype=np.int64))
        return self._index

    def _open(self, name):
        f = self._files.get(name)
        if f is None:
            f = safe_open(os.path.join(self.root, name), framework="numpy")
            self._files[name] = f
            if len(self._files) > self.max_open_files:
                self._files.popitem(last=False)
        else:
            self._files.move_to_end(name)
        return f

    def __getstate__(self):  # open files stay behind (DataLoader workers reopen them)
        state = dict(self.__dict__)
        state["_files"] = collections.OrderedDict()
        return state

    def __repr__(self):
        return f"loom.Dataset({self.root!r}, {len(self.manifests)} manifest file(s))"
