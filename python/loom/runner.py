"""Finding the loom binary and running `loom run` as a subprocess."""
import collections
import os
import re
import shutil
import signal
import subprocess
import sys

MIN_VERSION = (0, 2, 0)  # the oldest `loom --version` this package works with (datasets are 0.2.0)

_versions = {}  # (path, mtime) -> version tuple


class LoomError(RuntimeError):
    """loom failed. `message` is loom's `loom: error:` line without that prefix (or a
    description when loom wrote none), `line` the whole line, `exit_code` loom's exit status
    (None when it did not run), `stderr` the last lines it wrote, `command` the argv."""

    def __init__(self, message, exit_code=None, line=None, stderr="", command=None):
        # No `loom: error:` line (a crash, a parse error of the option library): the message
        # and what loom wrote last.
        tail = "\n".join(stderr.splitlines()[-5:])
        super().__init__(line or (f"{message}; its stderr ends:\n{tail}" if tail else message))
        self.message = message
        self.exit_code = exit_code
        self.line = line
        self.stderr = stderr
        self.command = command


class LoomInterrupted(LoomError):
    """loom stopped on SIGINT/SIGTERM (exit 130): finished records are kept; run again with
    resume=True to finish."""


def loom_version(binary):
    """The version `binary --version` prints on its first line (`loom 0.2.0` → (0, 2, 0))."""
    try:
        key = (binary, os.stat(binary).st_mtime_ns)
    except OSError as e:
        raise LoomError(f"cannot run {binary}: {e.strerror}") from None
    if key not in _versions:
        try:
            p = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
        except OSError as e:
            raise LoomError(f"cannot run {binary}: {e.strerror}") from None
        first = (p.stdout or p.stderr).splitlines()[:1]
        m = re.match(r"loom (\d+(?:\.\d+)*)\b", first[0] if first else "")
        if p.returncode != 0 or not m:
            raise LoomError(f"{binary} --version printed {first[0] if first else 'nothing'!r} "
                            f"(exit {p.returncode}); expected 'loom <version>'")
        _versions[key] = tuple(int(x) for x in m.group(1).split("."))
    return _versions[key]


def find_loom(binary=None):
    """The loom binary to run: `binary`, else $LOOM_BIN, else `loom` on PATH; its version
    must be at least MIN_VERSION. Raises LoomError naming where it looked."""
    if binary is None and os.environ.get("LOOM_BIN"):
        binary, where = os.environ["LOOM_BIN"], "LOOM_BIN"
    elif binary is None:
        binary, where = shutil.which("loom"), "PATH"
        if binary is None:
            raise LoomError("no loom binary: set LOOM_BIN to its path or put it on PATH")
    else:
        where = "the binary argument"
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise LoomError(f"{where} names {binary}, which is not an executable file")
    version = loom_version(binary)
    if _pad(version) < _pad(MIN_VERSION):
        raise LoomError(f"{binary} is loom {'.'.join(map(str, version))}; this package needs "
                        f"loom >= {'.'.join(map(str, MIN_VERSION))}")
    return binary


def _pad(v):
    return tuple(v) + (0,) * (4 - len(v))


class RunResult:
    """A finished `loom run` (exit 0 or 1). `jobs_failed` is True when loom exited 1: the
    run finished but some jobs wrote error records (read them with `errors()`)."""

    def __init__(self, exit_code, command, jobs, out, report, tokens_out):
        self.exit_code = exit_code
        self.command = command
        self.jobs, self.out, self.report, self.tokens_out = jobs, out, report, tokens_out

    @property
    def jobs_failed(self):
        return self.exit_code == 1

    def results(self):
        """All records of `out`, lazily (loom.read_results)."""
        from .results import read_results
        return read_results(self.out)

    def errors(self):
        return (r for r in self.results() if not r.ok)

    def dataset(self):
        from .dataset import Dataset
        if self.tokens_out is None:
            raise ValueError("this run wrote no dataset (tokens_out=None)")
        return Dataset(self.tokens_out)

    def __repr__(self):
        return f"loom.RunResult(exit_code={self.exit_code}, out={self.out!r})"


def shard_path(path, shard):
    """The file loom writes for `path` as shard "K/N" (lib/io/shard.h): out.jsonl →
    out.shard-K-of-N.jsonl; unchanged for N = 1, "-", and shards not given as K/N."""
    m = re.fullmatch(r"(\d+)/(\d+)", str(shard or ""))
    if path is None or path == "-" or not m or int(m.group(2)) <= 1:
        return path
    tag = f".shard-{m.group(1)}-of-{m.group(2)}"
    name = path.rfind("/") + 1
    dot = path.rfind(".")
    return path + tag if dot <= name else path[:dot] + tag + path[dot:]


# The banner's "jobs FILE, shard K/N (source); results ..." (text or a JSON log line).
_SHARD_BANNER = re.compile(r"\bjobs .*, shard (\d+)/(\d+) \(")
# What --quiet keeps: warnings and errors, in either log format.
_LOUD = re.compile(r'loom: (warning|error|internal error):|"level": ?"(warning|error)"')


def _flags(options):
    argv = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    return argv


def run(model, jobs, out, *, report=None, tokens_out=None, progress=None, binary=None,
        jobs_path=None, **options):
    """Runs `loom run --model MODEL --jobs JOBS --out OUT [OPTIONS]` and waits for it.

    `model`: a checkpoint folder or a loom.Model. `jobs`: a jobs file, or Jobs / dicts, which
    are written to `jobs_path` (default: OUT + ".jobs.jsonl"). `options`: any `loom run`
    option, `max_seqs=8` for `--max-seqs 8`, `resume=True` for `--resume` (False/None: left
    out). loom's stderr (progress, summary) goes line by line to `progress`, a callable, or
    to sys.stderr when None; progress=False drops it.

    Returns a RunResult for exit 0 and exit 1 (`jobs_failed`: some jobs wrote error
    records); with a shard its `out` and `report` are the shard-tagged files loom wrote (for
    shard="auto" or "array", the shard loom resolved from the environment, as its banner
    says). Raises LoomError with loom's `loom: error:` line for exit 2 and any other failure,
    LoomInterrupted for exit 130.
    """
    from .jobs import write_jobs
    binary = find_loom(binary)
    model_path = os.fspath(getattr(model, "path", model))
    out = os.fspath(out)
    if isinstance(jobs, (str, os.PathLike)):
        jobs = os.fspath(jobs)
    else:
        jobs = write_jobs(jobs_path or out + ".jobs.jsonl", jobs)
    shard = options.get("shard")
    # loom resolves "auto" and "array" from the environment and names the shard in its banner,
    # which --quiet would hide: then loom runs without it and only warnings and errors pass.
    resolving = str(shard) in ("auto", "array")
    filter_quiet = resolving and bool(options.get("quiet"))
    if filter_quiet:
        options = dict(options, quiet=None)
    command = [binary, "run", "--model", model_path, "--jobs", jobs, "--out", out]
    command += _flags({"report": report, "tokens_out": tokens_out, **options})
    if progress is None:
        progress = lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush())  # noqa: E731
    tail = collections.deque(maxlen=40)
    error_line = None
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, errors="replace")
    try:
        for line in proc.stderr:
            line = line.rstrip("\n")
            tail.append(line)
            if error_line is None and re.match(r"loom: (internal )?error:", line):
                error_line = line
            banner = _SHARD_BANNER.search(line) if resolving else None
            if banner:
                shard, resolving = f"{banner.group(1)}/{banner.group(2)}", False
            if progress and not (filter_quiet and not _LOUD.search(line)):
                progress(line)
        code = proc.wait()
    except BaseException:  # KeyboardInterrupt included: let loom stop cleanly, then re-raise
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        proc.wait()
        raise
    finally:
        proc.stderr.close()
    if code in (0, 1):
        return RunResult(code, command, jobs, shard_path(out, shard), shard_path(report, shard),
                         tokens_out)
    kind = LoomInterrupted if code == 130 else LoomError
    if error_line:
        message = re.sub(r"^loom: (internal )?error: ", "", error_line)
    elif code < 0:
        message = f"loom was killed by signal {-code}"
    else:
        message = f"loom exited with {code}"
    raise kind(message, code, error_line, "\n".join(tail), command)
