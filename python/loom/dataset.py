"""Reading a token dataset (`loom run --tokens-out DIR`, README "The token dataset").

The manifest is the index: one JSON line per sample naming its data file and rows. A merged
folder (`loom merge --dataset`) has manifest.jsonl; a sharded one before the merge has only
manifest.shard-K-of-N.jsonl files, which are read one after the other in shard order (each
shard's stays after the merge, for Dataset(shard="K/N")). Data files are opened on first use
and kept open (at most `max_open_files`); rows are sliced out of them without reading the
rest of the file.
"""
import collections
import hashlib
import json
import operator
import os
import re
import warnings

import numpy as np
from safetensors import safe_open

from .runner import _parse_shard as _shard_numbers

# A shard's manifest (its samples) and index (dataset.shard-K-of-N.json: its state); a shard
# that generated no sample has an index and no manifest.
_SHARD_FILE = re.compile(r"(?:manifest|dataset)\.shard-(\d+)-of-(\d+)\.jsonl?$")
_SUMS = re.compile(r"SHA256SUMS(\.shard-\d+-of-\d+)?$")
_SUM_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *]?(.+)$")


def _slice(f, names, begin, end):
    """Rows [begin, end) of the first of `names` the file holds (float32 action rows, or
    int32 action ids for models whose actions are vocabulary tokens), else None."""
    for name in names:
        if name in f.keys():
            return f.get_slice(name)[begin:end]
    return None


def _parse_shard(shard):
    """(K, N) of "K/N" (spaces allowed), else ValueError."""
    parsed = _shard_numbers(re.sub(r"\s", "", str(shard)))
    if not parsed or not parsed[0] < parsed[1]:
        raise ValueError(f"shard {shard!r}: expected \"K/N\" with 0 <= K < N")
    return parsed


def _parts(root, shard=None):
    """What a dataset folder holds to read: (tags, missing). A tag names one index and its
    manifest: "" for dataset.json and manifest.jsonl (a merged folder, or a run without
    shards), ".shard-K-of-N" for a shard's. `missing`: the "K/N" of shards with neither (never
    ran here). shard="K/N": only that shard's tag."""
    if shard is not None:
        k, n = _parse_shard(shard)
        tag = f".shard-{k}-of-{n}" if n > 1 else ""
        if not any(os.path.exists(os.path.join(root, f"{kind}{tag}{ext}"))
                   for kind, ext in (("manifest", ".jsonl"), ("dataset", ".json"))):
            raise FileNotFoundError(f"{root}: no manifest{tag}.jsonl or dataset{tag}.json: "
                                    f"shard {k}/{n} has written nothing here")
        return [tag], []
    if os.path.exists(os.path.join(root, "manifest.jsonl")):
        return [""], []
    shards = {}  # N -> {K}
    for name in os.listdir(root):
        m = _SHARD_FILE.match(name)
        if m:
            shards.setdefault(int(m.group(2)), set()).add(int(m.group(1)))
    if not shards:
        if os.path.exists(os.path.join(root, "dataset.json")):
            return [""], []  # a run of no samples
        raise FileNotFoundError(f"{root}: no manifest.jsonl or manifest.shard-K-of-N.jsonl; "
                                "is it a `loom run --tokens-out` folder?")
    if len(shards) > 1:
        raise ValueError(f"{root}: shard files of runs with different shard counts "
                         f"{sorted(shards)}; remove the stale ones")
    [(n, found)] = shards.items()
    tags = [f".shard-{k}-of-{n}" for k in sorted(found)]
    return tags, [f"{k}/{n}" for k in range(n) if k not in found]


def _manifests(root, tags):
    """The manifest files of these parts that exist, in reading order."""
    paths = [os.path.join(root, f"manifest{tag}.jsonl") for tag in tags]
    return [p for p in paths if os.path.exists(p)]


def manifest_paths(root, shard=None):
    """The manifest files of a dataset folder, in reading order (shard="K/N": that shard's)."""
    return _manifests(root, _parts(root, shard)[0])


def _unfinished(root, tags):
    """What is wrong with the indexes (dataset.json, dataset.shard-K-of-N.json): 'name: state'
    of each that is not complete (a run still writing, stopped, failed with its error, or a
    merge with --allow-partial), and shards of two runs: other job lines read (jobs_read) or
    another run_identity, as loom verify and merge --dataset say."""
    out, first = [], None
    for tag in tags:
        name = f"dataset{tag}.json"
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                info = json.load(f)
        except (OSError, ValueError):
            continue
        state = info.get("state")
        if state != "complete":
            error = info.get("error")
            out.append(f"{name}: {state}" + (f" ({error})" if error else ""))
        if first is None:
            first = (name, info)
            continue
        for key in ("jobs_read", "run_identity"):
            if key in info and key in first[1] and info[key] != first[1][key]:
                out.append(f"{name} and {first[0]} are not shards of one run ({key} differs: "
                           "loom verify says how)")
                break
    return out


def _lines(f):
    """(byte offset, line) of each complete non-blank line of a file open for reading bytes;
    a last line without its newline is one loom is still writing and is left out."""
    offset = 0
    for raw in f:
        if not raw.endswith(b"\n"):
            return
        if raw.strip():
            yield offset, raw
        offset += len(raw)


def _entry(raw, path, where):
    """A manifest line as a dict; one that is no JSON object raises ValueError naming it."""
    try:
        entry = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"{path} {where}: not a manifest entry ({e})") from None
    if not isinstance(entry, dict) or "file" not in entry or "rows" not in entry:
        raise ValueError(f"{path} {where}: not a manifest entry (expected an object with file "
                         "and rows)")
    return entry


def _identity(st):
    return st.st_dev, st.st_ino


def _replaced(path, why):
    return RuntimeError(f"{path} {why} since this Dataset indexed it (a run with --overwrite "
                        "or --resume, or a merge, rewrote the folder); make a new loom.Dataset")


class _Index:
    """Where each sample's manifest line is (`which` manifest, byte `offsets`), and what each
    manifest file was when indexed: its (st_dev, st_ino) and the bytes indexed. While the
    index is held its manifests stay open (`files`): the inode of an open file is not reused,
    so a path that names another inode names a file that replaced the indexed one."""

    def __init__(self, paths):
        self.paths, self.files, self.ids, self.ends = paths, [], [], []
        which, offsets = [], []
        try:
            for n, path in enumerate(paths):
                f = open(path, "rb")
                self.files.append(f)
                self.ids.append(_identity(os.fstat(f.fileno())))
                end = 0
                for offset, raw in _lines(f):
                    which.append(n)
                    offsets.append(offset)
                    end = offset + len(raw)
                self.ends.append(end)
        except BaseException:
            self.close()
            raise
        self.which = np.asarray(which, dtype=np.int32)
        self.offsets = np.asarray(offsets, dtype=np.int64)

    def line(self, i):
        """The manifest line of sample i, from the file indexed, once its path is checked to
        name that file still, as long as it was then."""
        n, offset = int(self.which[i]), int(self.offsets[i])
        path = self.paths[n]
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise _replaced(path, "was removed") from None
        if self.files[n] is None:  # unpickled in a DataLoader worker: reopen, the same file
            f = open(path, "rb")
            if _identity(os.fstat(f.fileno())) != self.ids[n]:
                f.close()
                raise _replaced(path, "was replaced")
            self.files[n] = f
        if _identity(st) != self.ids[n]:
            raise _replaced(path, "was replaced")
        if st.st_size < self.ends[n]:
            raise _replaced(path, "is shorter than it was")
        fd = self.files[n].fileno()
        raw = b""
        while not raw.endswith(b"\n"):  # pread: no shared file position between threads
            block = os.pread(fd, 4096, offset + len(raw))
            if not block:
                raise _replaced(path, "is shorter than it was")
            raw += block[:block.find(b"\n") + 1 or len(block)]
        return raw

    def close(self):
        for f in self.files:
            if f is not None:
                f.close()

    __del__ = close  # the manifests are closed with the index, without a ResourceWarning

    def __getstate__(self):  # the open files stay behind; line() reopens and checks them
        state = dict(self.__dict__)
        state["files"] = [None] * len(self.files)
        return state


class Dataset:
    """`ds[i]` → (frames, actions, meta) for the i-th sample in manifest order: frames int32
    [F, P] (plain models: the generated tokens, int32 [n]), actions float32 [F, A, action_dim]
    (models whose actions are vocabulary tokens: the ids, int32 [F, A], -1 where none)
    (the rows after each frame, NaN where the job gave none; None for plain models or
    --no-dataset-actions), meta the sample's manifest line as a dict. `len(ds)`, iteration in
    manifest order, `ds.context(i)` for the prompt's frames.

    `len` and `ds[i]` use an index of the manifest taken at their first use; if a run
    replaces the folder's manifest after that (--overwrite, --resume, a merge), they raise
    RuntimeError rather than read another run's line: make a new Dataset (lines appended by
    a run still writing are fine). Iteration reads the manifest files as they are when it
    starts. Data files are checked as they are opened, and a file replaced since is opened
    anew, so a sample's frames always come from the file its manifest line names.

    `shard="K/N"`: only the samples of shard K of N (its manifest.shard-K-of-N.jsonl, also
    after a merge). Without it, a folder whose shards have not all run (or finished) warns
    which, as `loom verify` says it."""

    def __init__(self, root, max_open_files=64, shard=None):
        self.root = os.fspath(root)
        self.shard = shard
        tags, missing = _parts(self.root, shard)
        self.manifests = _manifests(self.root, tags)
        self.max_open_files = max_open_files
        self._files = collections.OrderedDict()  # name -> (safe_open handle, identity), LRU
        self._index = None  # an _Index, built on first use
        # dataset.json beside manifest.jsonl, dataset.shard-K-of-N.json beside a shard's.
        info = os.path.join(self.root, f"dataset{tags[0]}.json")
        self.info = None
        if os.path.exists(info):
            with open(info, encoding="utf-8") as f:
                self.info = json.load(f)
        problems = _unfinished(self.root, tags)
        problems += [f"dataset.shard-{k.replace('/', '-of-')}.json: missing (shard {k} never "
                     "ran here)" for k in missing]
        if problems:
            todo = ("run the missing shards, finish the others (loom run --resume) and merge "
                    "(loom merge --dataset)" if missing else
                    "finish the run (loom run --resume)" if tags == [""] and not (
                        (self.info or {}).get("shard") or {}).get("merged_from") else
                    "finish the runs (loom run --resume) and merge again (loom merge --dataset)")
            warnings.warn(f"{self.root}: not a finished dataset ({', '.join(problems)}); "
                          f"samples may be missing: {todo}", stacklevel=2)

    def entries(self):
        """The manifest lines as dicts, in order, read as they are needed from the manifest
        files the folder has when the iteration starts. A manifest replaced during the
        iteration (a run with --overwrite or --resume, a merge) raises RuntimeError: its
        buffered lines would name files that now hold other samples."""
        for path in manifest_paths(self.root, self.shard):
            with open(path, "rb") as f:
                held = _identity(os.fstat(f.fileno()))  # not reused while f is open
                for n, (_, raw) in enumerate(_lines(f), 1):
                    try:
                        now = _identity(os.stat(path))
                    except FileNotFoundError:
                        now = None
                    if now != held:
                        raise RuntimeError(f"{path} was replaced during the iteration (a run "
                                           "with --overwrite or --resume, or a merge, rewrote "
                                           "the folder); iterate a new loom.Dataset")
                    yield _entry(raw, path, f"line {n}")

    def __iter__(self):
        for entry in self.entries():
            try:
                yield self.read(entry)
            except FileNotFoundError:
                raise RuntimeError(f"{os.path.join(self.root, entry['file'])}, named by the "
                                   "manifest, is gone (a run with --overwrite or --resume "
                                   "removed it); iterate a new loom.Dataset") from None

    def __len__(self):
        return len(self._indexed().offsets)

    def __getitem__(self, i):
        return self.read(self.entry(i))

    def entry(self, i):
        """The manifest line of sample i."""
        i = operator.index(i)
        index = self._indexed()
        n = len(index.offsets)
        if not -n <= i < n:
            raise IndexError(f"sample {i} of a dataset of {n}")
        return _entry(index.line(i % n), index.paths[index.which[i % n]], f"sample {i % n}")

    def read(self, entry):
        """(frames, actions, meta) of the sample a manifest line describes."""
        f = self._open(entry["file"])
        begin, end = entry["rows"]
        tokens = f.get_slice("tokens")[begin:end]
        actions = _slice(f, ("actions", "action_ids"), begin, end)
        return tokens, actions, entry

    def context(self, i):
        """(context, context_actions) of sample i (an index, or its manifest line): its
        prompt's frames int32 [n_ctx, P] (plain models: the prompt ids) and their action rows
        float32 [n_ctx, A, action_dim]; None for what the run left out (--no-dataset-context,
        --no-dataset-actions)."""
        entry = i if isinstance(i, dict) else self.entry(i)
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

    def _indexed(self):
        if self._index is None:
            self._index = _Index(manifest_paths(self.root, self.shard))
        return self._index

    def _open(self, name):
        """The open data file `name`. A run with --overwrite writes a new file under the old
        name: the path's inode, checked at each use, says whether the one held is still it
        (an open file's inode is not reused while it is held)."""
        path = os.path.join(self.root, name)
        held = self._files.get(name)
        if held is not None and held[1] == _identity(os.stat(path)):
            self._files.move_to_end(name)
            return held[0]
        while True:  # the file named then is the file opened: stat around the open
            before = _identity(os.stat(path))
            f = safe_open(path, framework="numpy")
            if _identity(os.stat(path)) == before:
                break
        self._files[name] = (f, before)
        self._files.move_to_end(name)
        if len(self._files) > self.max_open_files:
            self._files.popitem(last=False)
        return f

    def close(self):
        """Closes the data files and manifests held open; the next use opens them again
        (and indexes the manifest anew)."""
        self._files.clear()
        if self._index is not None:
            self._index.close()
            self._index = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):  # open files stay behind (DataLoader workers reopen them)
        state = dict(self.__dict__)
        state["_files"] = collections.OrderedDict()
        return state

    def __repr__(self):
        shard = "" if self.shard is None else f", shard={self.shard!r}"
        return f"loom.Dataset({self.root!r}{shard}, {len(self.manifests)} manifest file(s))"
