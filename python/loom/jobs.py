"""Jobs for `loom run`: build them from numpy arrays, check them as loom would, write a JSONL file.

A job is checked by validating the exact JSON line it writes with the rules of loom's job
reader (lib/io/jobs.cpp, ported check by check in the same order), so a refused job raises
`JobError` with the message loom would put in that line's error record, without the
`line N: ` prefix. Checking needs the model's layout (`Model`); without one, jobs are written
unchecked and loom checks them at run time.
"""
import errno
import filecmp
import json
import os
import re
import secrets
import subprocess

import numpy as np

PLACEHOLDER_ID = -3  # loom's default --placeholder-id: the token id of an action slot
MAX_JOB_FRAMES = 100000
MAX_NUM_SAMPLES = 1024

_SHOW = 40  # bytes of a bad value a message quotes
_FLT_MAX = float(np.finfo(np.float32).max)
_FLT_MAX_TEXT = "3.40282e+38"  # as loom prints it
_MIN_TEMPERATURE = float(np.float32(1e-5))  # core/sampling_params.h kMinTemperature
_INT32_MAX = 2**31 - 1
_FRAME_FIELDS = ("id", "prompt_token_ids", "actions", "num_frames", "overlap", "sampling",
                 "num_samples")
# Frame models whose actions are vocabulary ids (action_projection "tokens").
_TOKEN_FRAME_FIELDS = ("id", "prompt_token_ids", "action_token_ids", "num_frames", "overlap",
                       "sampling", "num_samples")
_PLAIN_FIELDS = ("id", "prompt_token_ids", "max_tokens", "ignore_eos", "sampling",
                 "num_samples")
_SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "seed")
# The architectures of models/llama_action_tokens.json (a test keeps the two equal): frames of
# P image ids then A action ids, T frames a round from frames_per_round or
# max_position_embeddings / (P + A), image ids [0, image_vocab_size) when the config sets it.
ACTION_TOKEN_ARCHITECTURES = ("LlamaActionTokensForCausalLM",)


class JobError(ValueError):
    """A job loom would refuse. `message` is the text of loom's error record for its line,
    without the `line N: ` prefix."""

    def __init__(self, message, line=None):
        super().__init__(message)
        self.message = message
        self.line = line  # the job line refused


class Model:
    """The job layout of a checkpoint, read from its config.json: a frame model when the
    config has `num_image_patches` (P image slots, A action slots of `action_dim` numbers per
    frame, `temporal_rows` frames per round), else a plain model (Llama, GPT-2, OPT: its
    `vocab_size` and `max_position_embeddings`, `n_positions` or `n_ctx`). A frame model of an
    ACTION_TOKEN_ARCHITECTURES architecture (`action_ids`) writes its actions as A vocabulary
    ids per frame (`action_token_ids`) and samples image ids from `image_ids` [lo, hi). A
    folder with params.json and no config.json (Meta's layout) is read as loom reads it,
    through `loom inspect` (the binary of find_loom(binary))."""

    def __init__(self, path, binary=None):
        self.path = os.fspath(path)
        config = os.path.join(self.path, "config.json")
        if not os.path.exists(config) and os.path.isfile(os.path.join(self.path, "params.json")):
            self._inspect(binary)
            return
        with open(config, encoding="utf-8") as f:
            self._load(json.load(f))

    @classmethod
    def from_config(cls, config, path=None):
        """A Model from a config dict (the keys of an HF config.json)."""
        m = cls.__new__(cls)
        m.path = path
        m._load(config)
        return m

    def _load(self, c):
        def key(name, default=None):
            if name in c and c[name] is not None:
                return int(c[name])
            if default is None:
                raise KeyError(f"{self.path or 'config'}: config.json has no \"{name}\"")
            return default

        self.config = c
        self.architecture = (c.get("architectures") or [""])[0]
        self.vocab_size = key("vocab_size")
        # Llama and OPT name it max_position_embeddings, GPT-2 n_positions (older ones n_ctx).
        self.max_positions = key("max_position_embeddings", key("n_positions", key("n_ctx", 0)))
        self.frames = "num_image_patches" in c
        self.image_tokens = key("num_image_patches") if self.frames else 0  # P
        self.action_tokens = key("num_action_tokens") if self.frames else 0  # A
        self.action_ids = self.frames and self.architecture in ACTION_TOKEN_ARCHITECTURES
        image_end = 0  # the table's logit_end; 0: every id
        if self.action_ids:
            self.action_dim = 0
            S = self.image_tokens + self.action_tokens
            self.temporal_rows = key("frames_per_round", self.max_positions // S)  # T
            image_end = key("image_vocab_size", 0)
        else:
            self.action_dim = key("action_dim") if self.frames else 0
            self.temporal_rows = key("num_temporal_embeddings") if self.frames else 0  # T
        self.image_end = image_end
        self.image_ids = (0, image_end if image_end > 0 else self.vocab_size)

    def _inspect(self, binary):
        """The layout `loom inspect --json` reads from a folder that has no config.json: its
        model table knows where each size is (params.json, or a tensor's shape)."""
        from .runner import LoomError, find_loom
        try:
            binary = find_loom(binary)
        except LoomError as e:
            raise LoomError(f"{self.path} has params.json and no config.json: its layout is "
                            f"read with `loom inspect`, which needs the loom binary: "
                            f"{e.message}") from None
        p = subprocess.run([binary, "inspect", "-m", self.path, "--json"], capture_output=True,
                           text=True, errors="replace")
        if p.returncode != 0:
            lines = p.stderr.strip().splitlines()
            raise LoomError(f"loom inspect -m {self.path} failed: "
                            f"{lines[-1] if lines else f'exit {p.returncode}'}", p.returncode,
                            stderr=p.stderr)
        found = json.loads(p.stdout)
        spec = found["spec"]
        with open(os.path.join(self.path, "params.json"), encoding="utf-8") as f:
            self.config = json.load(f)
        self.architecture = found.get("architecture", "")
        self.vocab_size = int(spec["vocab"])
        self.max_positions = int(spec["max_positions"])
        self.image_tokens = int(spec["image_tokens"])
        self.action_tokens = int(spec["action_tokens"])
        self.frames = self.image_tokens > 0
        self.action_ids = spec.get("action_projection") == "tokens"
        if self.action_ids:  # the image-id range is in the config only
            raise ValueError(f"{self.path}: a model whose actions are vocabulary ids needs its "
                             "config.json")
        self.action_dim = int(spec["action_dim"])
        self.temporal_rows = int(spec["temporal_rows"])
        self.image_end = 0
        self.image_ids = (0, self.vocab_size)

    def __repr__(self):
        if self.action_ids:
            return (f"loom.Model({self.path!r}: P={self.image_tokens}, A={self.action_tokens} "
                    f"action ids, T={self.temporal_rows})")
        if self.frames:
            return (f"loom.Model({self.path!r}: P={self.image_tokens}, A={self.action_tokens}, "
                    f"action_dim={self.action_dim}, T={self.temporal_rows})")
        return f"loom.Model({self.path!r}: plain, vocab {self.vocab_size})"


def _json_default(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"{type(v).__name__} is not a JSON value")


def _dumps(obj):
    # NaN and Infinity are written as such (not valid JSON), so loom's message about them is
    # the one the user gets.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=True,
                      default=_json_default)


class Job:
    """One job line.

    Frame models: `Job(prompt_frames, actions, num_frames, ...)` with `prompt_frames` an
    integer array [n_ctx, P] of image token ids (the A action-slot placeholders of each frame
    are inserted here), `actions` a float array [rows, action_dim] (or [frames, A, action_dim]),
    A·(n_ctx + num_frames) rows, the last frame's A rows optional. A comes from `model`, or
    from 3-D `actions`. With `model`, the job is checked and a bad one raises JobError.
    Plain models: `Job.plain(prompt_token_ids, max_tokens, ...)`.
    """

    def __init__(self, prompt_frames, actions, num_frames, sampling=None, id=None,
                 num_samples=None, overlap=None, *, model=None, placeholder_id=PLACEHOLDER_ID):
        frames = np.asarray(prompt_frames)
        if frames.ndim != 2:
            raise ValueError("prompt_frames: expected an array [context frames, image tokens], "
                             f"found shape {frames.shape}")
        acts = None if actions is None else np.asarray(actions)
        if model is not None:
            A = model.action_tokens
        elif acts is not None and acts.ndim == 3:
            A = acts.shape[1]
        else:
            raise ValueError("Job: pass model= (or actions shaped [frames, A, action_dim]) so "
                             "that the action slots of a frame are known")
        if acts is not None and acts.ndim == 3:
            if acts.shape[1] != A:  # a frame's rows are its A action slots, not reshaped to fit
                raise ValueError(f"actions: expected [frames, A={A}, action_dim] for this model, "
                                 f"found shape {acts.shape}")
            acts = acts.reshape(-1, acts.shape[2])
        # Lists, not one array: each id keeps the type it was given (no promotion to float).
        slots = [placeholder_id] * A
        prompt = [v for frame in frames.tolist() for v in frame + slots]
        self._set({"id": id, "prompt_token_ids": prompt, "actions": acts,
                   "num_frames": num_frames, "overlap": overlap, "sampling": sampling,
                   "num_samples": num_samples}, model, placeholder_id)

    @classmethod
    def with_action_ids(cls, prompt_frames, prompt_action_ids, action_token_ids, num_frames,
                        sampling=None, id=None, num_samples=None, overlap=None, *, model=None,
                        placeholder_id=PLACEHOLDER_ID):
        """A job for a model whose actions are vocabulary ids (`Model.action_ids`, e.g.
        models/llama_action_tokens.json): `prompt_frames` [n_ctx, P] image ids,
        `prompt_action_ids` [n_ctx, A] each context frame's action ids (written after its image
        ids), `action_token_ids` [rows, A] one row after each generated frame (num_frames rows,
        the last optional; None for none). With `model`, checked as loom checks the line."""
        frames = np.asarray(prompt_frames)
        acts = np.asarray(prompt_action_ids)
        if frames.ndim != 2 or acts.ndim != 2 or len(frames) != len(acts):
            raise ValueError("prompt_frames, prompt_action_ids: expected arrays [context frames, "
                             f"P] and [context frames, A], found shapes {frames.shape} and "
                             f"{acts.shape}")
        prompt = [v for f, a in zip(frames.tolist(), acts.tolist()) for v in f + a]
        job = cls.__new__(cls)
        job._set({"id": id, "prompt_token_ids": prompt, "action_token_ids": action_token_ids,
                  "num_frames": num_frames, "overlap": overlap, "sampling": sampling,
                  "num_samples": num_samples}, model, placeholder_id)
        return job

    @classmethod
    def plain(cls, prompt_token_ids, max_tokens, sampling=None, id=None, num_samples=None,
              ignore_eos=None, *, model=None, placeholder_id=PLACEHOLDER_ID):
        """A job for a plain Llama model: prompt ids and the number of tokens to generate."""
        job = cls.__new__(cls)
        job._set({"id": id, "prompt_token_ids": np.asarray(prompt_token_ids).reshape(-1),
                  "max_tokens": max_tokens, "ignore_eos": ignore_eos, "sampling": sampling,
                  "num_samples": num_samples}, model, placeholder_id)
        return job

    @classmethod
    def from_dict(cls, fields, *, model=None, placeholder_id=PLACEHOLDER_ID):
        """A job from the fields of a job line as a dict (None values are left out)."""
        return cls.from_line(_dumps({k: v for k, v in fields.items() if v is not None}),
                             model=model, placeholder_id=placeholder_id)

    @classmethod
    def from_line(cls, line, *, model=None, placeholder_id=PLACEHOLDER_ID):
        """A job from one line of a jobs file, checked as loom checks that line. A leading
        UTF-8 byte order mark is dropped, as loom drops one at the start of a jobs file."""
        job = cls.__new__(cls)
        job.line = _strip_bom(line.rstrip("\r\n"))
        job.fields = _parse(job.line)
        if model is not None:
            check_line(job.line, model, placeholder_id, parsed=job.fields)
        job.fields = json.loads(job.line)  # plain dicts from here on
        return job

    def _set(self, fields, model, placeholder_id):
        self.fields = {k: v for k, v in fields.items() if v is not None}
        self.line = _dumps(self.fields)
        self.fields = json.loads(self.line)
        if model is not None:
            check_line(self.line, model, placeholder_id)

    @property
    def id(self):
        return self.fields.get("id")

    def to_dict(self):
        return json.loads(self.line)

    def to_json(self):
        """The job line (no newline)."""
        return self.line

    def __repr__(self):
        return f"loom.Job({self.line[:80]}{'...' if len(self.line) > 80 else ''})"


class OtherJobsError(FileExistsError):
    """write_jobs(overwrite=False) found the file holding other jobs, and left it."""


def write_jobs(path, jobs, *, overwrite=True):
    """Writes `jobs` (Job objects, dicts or JSON lines) to a JSONL file, one per line, through
    a temporary file renamed into place; the file gets the permissions of any new file (0666
    less the umask). A file already there with the same bytes is left as it is; one with
    other bytes is replaced, or with overwrite=False kept, raising OtherJobsError (a
    FileExistsError). A path that cannot be written raises OSError saying why. Returns the
    path."""
    path = os.fspath(path)
    if not path:
        raise ValueError("write_jobs: the path is empty")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, f"cannot write the jobs file {path}: it is a folder")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise type(e)(e.errno, f"cannot write the jobs file {path}: cannot make its folder "
                               f"{folder}: {e.strerror} (is a part of it a file?)") from None
    try:
        tmp, fd = _new_file(folder)
    except OSError as e:
        raise type(e)(e.errno, f"cannot write the jobs file {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for job in jobs:
                if isinstance(job, Job):
                    text = job.line
                elif isinstance(job, dict):
                    text = _dumps(job)
                else:
                    text = str(job).rstrip("\r\n")
                f.write(text + "\n")
        if os.path.exists(path):
            if filecmp.cmp(tmp, path, shallow=False):
                os.unlink(tmp)
                return path
            if not overwrite:
                raise OtherJobsError(errno.EEXIST, f"{path} holds other jobs", path)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _new_file(folder):
    """A new file in `folder`, (path, fd); created with mode 0666 so that the kernel applies
    the umask (and a default ACL) as for any file, where mkstemp would make it 0600."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = os.path.join(folder, f".jobs-{os.getpid()}-{secrets.token_hex(6)}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue


# ---- loom's checks (lib/io/jobs.cpp), in its order ---------------------------------------------

class _Obj(dict):
    """A JSON object that remembers its (key, value) pairs in order, repeated keys included."""

    def __init__(self, pairs):
        super().__init__(pairs)
        self.pairs = pairs


def _strip_bom(text):
    return text[1:] if text.startswith("\ufeff") else text


def _lone_surrogate(value):
    """Whether a parsed JSON value holds a lone UTF-16 surrogate ("\\ud800"): json.loads joins
    a valid pair into one character, so any surrogate left is lone. loom refuses the line."""
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        pairs = getattr(value, "pairs", value.items())
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in pairs)
    return False


def _parse(text):
    try:
        value = json.loads(text, object_pairs_hook=_Obj)
    except ValueError as e:
        # Python's JSON errors are not simdjson's: this message is not loom's.
        raise JobError(f"not valid JSON ({e}): expected one JSON object per line, "
                       f"found {_quoted(text)}", line=text) from None
    if _lone_surrogate(value):  # as loom (simdjson) says it
        raise JobError("not valid JSON (bad escape in a string): expected one JSON object per "
                       f"line, found {_quoted(text)}", line=text)
    return value


def _bad(message):
    raise JobError(message)


def _quoted(s):
    b = s.encode("utf-8", "surrogatepass")
    cut = len(b) > _SHOW
    n = _SHOW if cut else len(b)
    while cut and n > 0 and (b[n] & 0xC0) == 0x80:
        n -= 1
    out = ['"']
    for c in b[:n].decode("utf-8", "surrogatepass"):
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20:
            out.append("\\u00%02x" % ord(c))
        elif 0xD800 <= ord(c) <= 0xDFFF:  # a lone surrogate (from a dict): printable
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    out.append('..."' if cut else '"')
    return "".join(out)


def _format_double(v):
    s = "%.9g" % v
    return s if any(c in s for c in ".eEn") else s + ".0"


def _is_int(v):  # a JSON integer (bool is not one)
    return type(v) is int


def _is_number(v):
    return type(v) in (int, float)


def _describe(v):
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if type(v) is int:
        return str(v)
    if type(v) is float:
        return _format_double(v)
    if isinstance(v, str):
        return _quoted(v)
    if isinstance(v, list):
        return "an empty list" if not v else f"a list of {len(v)} item{'' if len(v) == 1 else 's'}"
    return "an object"


def _get_int(v, what, lo, hi):
    if _is_int(v) and -2**63 <= v < 2**63 and lo <= v <= hi:
        return v
    _bad(f"{what}: expected an integer in [{lo}, {hi}], found {_describe(v)}")


def _one_of(names):
    return "one of " + ", ".join(f'"{n}"' for n in names)


_THE_MODELS = "the model's "


def _round_size(m, the):
    """What bounds a round, as loom's messages say it (jobs.cpp round_size)."""
    T = m.temporal_rows
    if not m.action_ids:  # a learned temporal table
        return f"{the}temporal table has {T} row{'' if T == 1 else 's'}"
    return f"a round holds {T} frame{'' if T == 1 else 's'}"


def _expected_action_id(m):
    s = f"an action token id in [0, {m.vocab_size})"
    if m.image_end > 0:
        s += f" outside the image ids [{m.image_ids[0]}, {m.image_ids[1]})"
    return s


def _valid_action_id(v, m):
    lo, hi = m.image_ids
    return 0 <= v < m.vocab_size and not (m.image_end > 0 and lo <= v < hi)


# simdjson refuses NaN, Infinity and numbers beyond 64 bits for the whole line; loom then finds
# the first such literal and the key before it. Python's json reads them, so the same scan
# runs on the text. Only text that Python parsed gets here: its numbers are valid JSON.
_SUSPECT = re.compile(r"NaN|Infinity|\d{19}|[eE]\+?\d{3}")


def _bad_literal(s):
    last_key = last_string = ""
    after_string = False
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == '"':
            j = i + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            last_string = s[i + 1:min(j, n)]
            after_string = True
            i = j + 1
            continue
        if c == ":" and after_string:
            last_key = last_string
        if c not in " \t":
            after_string = False
        if not (c in "-+.0123456789" or ("a" <= c <= "z") or ("A" <= c <= "Z")):
            i += 1
            continue
        j = i
        while j < n and (s[j].isascii() and s[j].isalnum() or s[j] in "-+._"):
            j += 1
        lit, i = s[i:j], j
        if lit in ("true", "false", "null"):
            continue
        if lit in ("NaN", "Infinity", "-Infinity"):
            return last_key, lit, False
        if any(ch in lit for ch in ".eE"):
            if float(lit) in (float("inf"), float("-inf")):
                return last_key, lit, True
        elif not -2**63 <= int(lit) < 2**64:
            return last_key, lit, True
    return None


def _literal_message(text):
    found = _bad_literal(text)
    if found is None:
        return None
    key, lit, out_of_range = found
    if not key:
        return (f"not valid JSON (unexpected {lit[:_SHOW]}): expected one JSON object per line, "
                f"found {_quoted(text)}")
    if out_of_range:
        return (f"field {_quoted(key)}: expected a number that fits in 64 bits (finite, at most "
                f"~1.8e308 and integers within [-2^63, 2^64)), found {lit}")
    return (f"field {_quoted(key)}: expected a JSON number, string, true, false or null (JSON has "
            f"no NaN or Infinity), found {lit[:_SHOW]}")


def check_line(text, model, placeholder_id=PLACEHOLDER_ID, parsed=None):
    """Raises JobError with loom's message if loom would refuse this job line for `model`
    (run with `--placeholder-id placeholder_id`); the error's `line` is the text checked.
    A leading UTF-8 byte order mark is dropped, as loom drops one at the start of a file."""
    text = _strip_bom(text)
    try:
        _check(_parse(text) if parsed is None else parsed, text, model, placeholder_id)
    except JobError as e:
        e.line = text
        raise


def _check(root, text, model, placeholder_id):
    if _SUSPECT.search(text):
        message = _literal_message(text)
        if message:
            _bad(message)
    if not isinstance(root, dict):
        _bad(f"expected a JSON object per line, found {_describe(root)}")
    pairs = root.pairs
    for key, value in pairs:  # the id first, so that it is read even from a bad line
        if key == "id":
            if value is not None:
                if not (isinstance(value, str) or (_is_int(value) and value < 2**64)):
                    _bad(f'field "id": expected a string or an integer, found {_describe(value)}')
                if value == "":
                    _bad('field "id": expected a non-empty string or an integer, found ""')
            break

    frames, tokens = model.frames, model.action_ids
    frame_fields = _TOKEN_FRAME_FIELDS if tokens else _FRAME_FIELDS
    f, seen = {}, set()
    for key, value in pairs:
        if key in seen:
            _bad(f"field {_quoted(key)}: expected each field once, found it a second time")
        seen.add(key)
        is_frame, is_plain = key in frame_fields, key in _PLAIN_FIELDS
        if tokens and key == "actions":
            _bad('field "actions" holds action rows of numbers: expected "action_token_ids" for '
                 'this model, whose actions are vocabulary ids, found "actions"')
        if not is_frame and not is_plain:
            names = frame_fields if frames else _PLAIN_FIELDS
            _bad(f"unknown field {_quoted(key)}: expected {_one_of(names)}, found {_quoted(key)}")
        if frames and not is_frame:
            _bad(f"field {_quoted(key)} is for plain (non-frame) models: expected \"num_frames\" "
                 f"for this frame model, found {_quoted(key)}")
        if not frames and not is_plain:
            _bad(f"field {_quoted(key)} is for frame models: expected \"max_tokens\" for this "
                 f"plain model, found {_quoted(key)}")
        if value is not None:
            f[key] = value

    if frames:
        n_ctx = _check_frame_prompt(f, model, placeholder_id)
        if "num_frames" not in f:
            _bad(f'missing field "num_frames": expected an integer in [1, {MAX_JOB_FRAMES}], '
                 "found no such field")
        num_frames = _get_int(f["num_frames"], 'field "num_frames"', 1, MAX_JOB_FRAMES)
        if tokens:
            _check_action_token_ids(f, model, num_frames)
        else:
            _check_actions(f, model, n_ctx, num_frames)
        T = model.temporal_rows
        if "overlap" in f:
            o = f["overlap"]
            if T - 1 < 1:
                _bad(f'field "overlap": expected no overlap ({_round_size(model, "the ")}, so '
                     f"rounds cannot carry frames), found {_describe(o)}")
            if _is_int(o) and T - 1 < o < 2**63:  # never clamped: said with the T it broke
                _bad(f'field "overlap": expected an integer in [1, {T - 1}] '
                     f"({_round_size(model, _THE_MODELS)}), found {_describe(o)}")
            _get_int(o, 'field "overlap"', 1, T - 1)
    else:
        _check_plain(f, model, placeholder_id)
    _check_sampling(f)
    if "num_samples" in f:
        _get_int(f["num_samples"], 'field "num_samples"', 1, MAX_NUM_SAMPLES)


def _read_ids(f):
    if "prompt_token_ids" not in f:
        _bad('missing field "prompt_token_ids": expected a list of token ids, found no such field')
    ids = f["prompt_token_ids"]
    if not isinstance(ids, list):
        _bad(f'field "prompt_token_ids": expected a list of token ids, found {_describe(ids)}')
    for i, v in enumerate(ids):
        if not (_is_int(v) and v < 2**63):
            _bad(f'field "prompt_token_ids" index {i}: expected an integer token id, '
                 f"found {_describe(v)}")
    return ids


def _check_frame_prompt(f, m, placeholder_id):
    ids = _read_ids(f)
    P, A, T = m.image_tokens, m.action_tokens, m.temporal_rows
    S = P + A
    if not ids or len(ids) % S:
        _bad(f'field "prompt_token_ids": expected a positive multiple of {S} ids (frames of {P} '
             f"image + {A} action slots), found {len(ids)}")
    n_ctx = len(ids) // S
    if T > 0 and n_ctx > T:
        _bad(f'field "prompt_token_ids": expected at most {T} context frames ({T * S} ids; '
             f"{_round_size(m, _THE_MODELS)}), found {n_ctx} frames "
             f"({len(ids)} ids)")
    lo, hi = m.image_ids
    a = np.asarray(ids, dtype=np.int64).reshape(n_ctx, S)
    wrong = np.zeros(a.shape, dtype=bool)
    wrong[:, :P] = (a[:, :P] < lo) | (a[:, :P] >= hi)
    if m.action_ids:
        image = (a[:, P:] >= lo) & (a[:, P:] < hi) if m.image_end > 0 else False
        wrong[:, P:] = (a[:, P:] < 0) | (a[:, P:] >= m.vocab_size) | image
    else:
        wrong[:, P:] = a[:, P:] != placeholder_id
    bad = np.flatnonzero(wrong)
    if bad.size:
        i = int(bad[0])
        v, (frame, slot) = ids[i], divmod(i, S)
        if slot < P:
            _bad(f'field "prompt_token_ids" index {i} (frame {frame}, image slot {slot}): '
                 f"expected an image token id in [{lo}, {hi}), found {v}"
                 + (" (the action placeholder)" if v == placeholder_id else ""))
        where = f'field "prompt_token_ids" index {i} (frame {frame}, action slot {slot - P})'
        if m.action_ids:
            _bad(f"{where}: expected {_expected_action_id(m)}, found {v}"
                 + (" (the action placeholder; this model's context frames hold their action "
                    "ids)" if v == placeholder_id else ""))
        _bad(f"{where}: expected the placeholder {placeholder_id}, found {v}")
    return n_ctx


def _check_actions(f, m, n_ctx, num_frames):
    A, dim = m.action_tokens, m.action_dim
    every = A * (n_ctx + num_frames)
    no_last = every - A
    expected = (f"{every} or {no_last} rows of {dim} numbers ({A} action slots x ({n_ctx} "
                f"context + {num_frames} generated frames); the last frame's actions are optional)")
    if "actions" not in f:
        if every == 0:
            return
        _bad(f'missing field "actions": expected {expected}, found no such field')
    rows = f["actions"]
    if not isinstance(rows, list):
        _bad(f'field "actions": expected {expected}, found {_describe(rows)}')
    if len(rows) not in (every, no_last):
        _bad(f'field "actions": expected {expected}, found {len(rows)} rows')
    for r, row in enumerate(rows):
        if not isinstance(row, list):
            _bad(f'field "actions" row {r}: expected a list of {dim} numbers, found {_describe(row)}')
        for c, x in enumerate(row[:dim]):
            if not _is_number(x):
                _bad(f'field "actions" row {r} column {c}: expected a finite number (JSON has no '
                     f"NaN or Infinity), found {_describe(x)}")
            if not abs(float(x)) <= _FLT_MAX:
                _bad(f'field "actions" row {r} column {c}: expected a finite number within float '
                     f"range (|x| <= 3.4e38), found {_format_double(float(x))}")
        if len(row) != dim:
            _bad(f'field "actions" row {r}: expected {dim} numbers, found {len(row)}')


def _check_action_token_ids(f, m, n):
    """"action_token_ids": one row of A ids after each generated frame, the last optional
    (job_actions.cpp parse_action_token_ids)."""
    A, name = m.action_tokens, '"action_token_ids"'
    expected = (f"{n} or {n - 1} rows of {A} action token ids (one row after each of the {n} "
                "generated frames; the last frame's row is optional)")
    if "action_token_ids" not in f:
        if n == 1:
            return
        _bad(f"missing field {name}: expected {expected}, found no such field")
    rows = f["action_token_ids"]
    if not isinstance(rows, list):
        _bad(f"field {name}: expected {expected}, found {_describe(rows)}")
    if len(rows) not in (n, n - 1):
        _bad(f"field {name}: expected {expected}, found {len(rows)} rows")
    for r, row in enumerate(rows):
        if not isinstance(row, list):
            _bad(f"field {name} row {r}: expected a list of {A} action token ids, "
                 f"found {_describe(row)}")
        if len(row) != A:
            _bad(f"field {name} row {r}: expected {A} ids, found {len(row)}")
        for c, x in enumerate(row):
            if not (_is_int(x) and x < 2**63 and _valid_action_id(x, m)):
                _bad(f"field {name} row {r} column {c}: expected {_expected_action_id(m)}, "
                     f"found {_describe(x)}")


def _check_plain(f, m, placeholder_id):
    ids = _read_ids(f)
    if not ids:
        _bad('field "prompt_token_ids": expected at least 1 token id, found none')
    mp = m.max_positions
    if mp > 0 and len(ids) >= mp:
        _bad(f'field "prompt_token_ids": expected at most {mp - 1} ids (max_position_embeddings '
             f"{mp} leaves room for 1 new token), found {len(ids)}")
    for i, v in enumerate(ids):
        if not 0 <= v < m.vocab_size:
            _bad(f'field "prompt_token_ids" index {i}: expected a token id in [0, {m.vocab_size}), '
                 f"found {v}" + (" (the action placeholder; this model has no action slots)"
                                 if v == placeholder_id else ""))
    if "max_tokens" not in f:
        _bad('missing field "max_tokens": expected an integer >= 1, found no such field')
    room = mp - len(ids) if mp > 0 else _INT32_MAX
    mt = f["max_tokens"]
    if _is_int(mt) and mt < 2**63 and mt > room and mt >= 1:
        _bad(f'field "max_tokens": expected at most {room} (max_position_embeddings {mp} - '
             f"{len(ids)} prompt tokens), found {_describe(mt)}")
    _get_int(mt, 'field "max_tokens"', 1, room)
    if "ignore_eos" in f and not isinstance(f["ignore_eos"], bool):
        _bad(f'field "ignore_eos": expected true or false, found {_describe(f["ignore_eos"])}')


def _check_sampling(f):
    if "sampling" not in f:
        return
    s = f["sampling"]
    if not isinstance(s, dict):
        _bad(f'field "sampling": expected an object with {_one_of(_SAMPLING_FIELDS)}, '
             f"found {_describe(s)}")
    seen = set()
    for key, e in s.pairs:
        if key in seen:
            short = key.encode("utf-8")[:_SHOW].decode("utf-8", "replace")
            _bad(f'field "sampling.{short}": expected each field once, found it a second time')
        seen.add(key)
        if key not in _SAMPLING_FIELDS:
            _bad(f'field "sampling": unknown field {_quoted(key)}: expected '
                 f"{_one_of(_SAMPLING_FIELDS)}, found {_quoted(key)}")
        if e is None:
            continue
        name = f'field "sampling.{key}"'
        if key in ("temperature", "top_p") and not _is_number(e):
            _bad(f"{name}: expected a number, found {_describe(e)}")
        if key == "temperature" and not (e == 0 or _MIN_TEMPERATURE <= e <= _FLT_MAX):
            _bad(f"{name}: expected 0 (greedy) or a number in [1e-05, {_FLT_MAX_TEXT}], found "
                 f"{_describe(e)}")
        elif key == "top_k":
            _get_int(e, name, 0, _INT32_MAX)
        elif key == "top_p" and not 0 < e <= 1:
            _bad(f"{name}: expected a number in (0, 1], found {_describe(e)}")
        elif key == "seed" and not (_is_int(e) and 0 <= e < 2**64):
            _bad(f"{name}: expected an integer in [0, 2^64), found {_describe(e)}")
