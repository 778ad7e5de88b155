"""Finding the loom binary and running `loom run` as a subprocess."""
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys

MIN_VERSION = (0, 2, 0)  # the oldest `loom --version` this package works with (datasets are 0.2.0)

_versions = {}  # (path, mtime) -> version tuple


class LoomError(RuntimeError):
    """loom failed. `message` is loom's error without its `loom: error:` prefix and the time
    stamp loom puts after it (from either log format), or a description when loom wrote
    none; `line` the whole line as loom printed it, `exit_code` loom's exit status (None when
    it did not run), `stderr` the last lines it wrote, `command` the argv."""

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
    run finished, but not every job line gave a result: some jobs wrote error records (read
    them with `errors()`), or loom skipped lines with a warning and no record (an invalid
    last line without its newline, as a torn write leaves); loom's warnings in `progress`
    say which. `shard` is the "K/N" the run was (None when it had none)."""

    def __init__(self, exit_code, command, jobs, out, report, tokens_out, shard=None):
        self.exit_code = exit_code
        self.command = command
        self.jobs, self.out, self.report, self.tokens_out = jobs, out, report, tokens_out
        self.shard = shard

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
        """The run's token dataset: for a shard of N > 1, only that shard's samples (those of
        `results()`), not the other shards' in the same folder."""
        from .dataset import Dataset
        if self.tokens_out is None:
            raise ValueError("this run wrote no dataset (tokens_out=None)")
        parsed = _parse_shard(self.shard)
        return Dataset(self.tokens_out, shard=self.shard if parsed and parsed[1] > 1 else None)

    def __repr__(self):
        return f"loom.RunResult(exit_code={self.exit_code}, out={self.out!r})"


def _parse_shard(shard):
    """(K, N) of a shard given as "K/N" (loom reads "01/02" as 1/2), else None."""
    m = re.fullmatch(r"(\d+)/(\d+)", str(shard or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def shard_path(path, shard):
    """The file loom writes for `path` as shard "K/N" (lib/io/shard.h): out.jsonl →
    out.shard-K-of-N.jsonl; unchanged for N = 1, "-", and shards not given as K/N."""
    parsed = _parse_shard(shard)
    if path is None or path == "-" or not parsed or parsed[1] <= 1:
        return path
    tag = f".shard-{parsed[0]}-of-{parsed[1]}"
    name = path.rfind("/") + 1
    dot = path.rfind(".")
    return path + tag if dot <= name else path[:dot] + tag + path[dot:]


# The banner's "jobs FILE, shard K/N (source); results ..." (text or a JSON log line).
_SHARD_BANNER = re.compile(r"\bjobs .*, shard (\d+)/(\d+) \(")
# What --quiet keeps: warnings and errors, in either log format.
_LOUD = re.compile(r'loom: (warning|error|internal error):|"level": ?"(warning|error)"')
# The stamp loom puts after a warning or error once a run has started, when stderr is not a
# terminal: " [2026-12-05T04:17:39.312Z +0:00:00.0]".
_STAMP = re.compile(r" \[\d{4}-\d\d-\d\dT[\d:.]+Z \+\d+:\d\d:\d\d\.\d\]$")
# What CLI11 reads as a true flag value (LOOM_QUIET=1, yes, on, ...; a positive number).
_TRUE = ("1", "t", "y", "+", "true", "on", "yes", "enable")


def _error_message(line):
    """loom's error message in one stderr line, or None when the line is no error: text
    (`loom: error: MSG [stamp]`) or a JSON log line ({"level": "error", "message": MSG})."""
    if line.startswith("{"):
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if isinstance(record, dict) and record.get("level") == "error":
            return str(record.get("message", ""))
        return None
    m = re.match(r"loom: (internal )?error: ", line)
    return _STAMP.sub("", line[m.end():]) if m else None


def _env(option):
    """The value loom takes for `option` from LOOM_<OPTION>; an empty variable is unset."""
    return os.environ.get("LOOM_" + option.upper()) or None


def _env_flag(option):
    value = (_env(option) or "").strip().lower()
    if value in _TRUE:
        return True
    try:
        return int(value) > 0
    except ValueError:
        return False  # false, no, off, or a value loom refuses with its own error


# Started in place of loom (on Linux): asks the kernel to send loom SIGTERM when the Python
# thread that started it dies (killed, a Jupyter restart), then becomes loom (exec keeps the
# request and the pid). loom stops on SIGTERM as on Ctrl-C: its records stay whole and its
# locks go. A fresh single-threaded process does this, not preexec_fn, which can deadlock
# in a multi-threaded parent. The signals Python ignores at start are reset for loom.
_PARENT_DEATH_SHIM = """\
import ctypes, os, signal, sys
for s in ("SIGPIPE", "SIGXFSZ"):
    if hasattr(signal, s):
        signal.signal(getattr(signal, s), signal.SIG_DFL)
ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    os._exit(143)  # the parent died before the request: loom must not start
try:
    os.execv(sys.argv[2], sys.argv[2:])
except OSError as e:
    sys.stderr.write("loom: error: cannot run %s: %s\\n" % (sys.argv[2], e.strerror))
    os._exit(127)
"""


def _launcher():
    """The argv prefix that starts loom with a parent-death signal; [] where there is none."""
    if not sys.platform.startswith("linux") or not sys.executable:
        return []
    return [sys.executable, "-I", "-S", "-c", _PARENT_DEATH_SHIM, str(os.getpid())]


# loom run's flags (no value): resume=1 or a numpy bool is one of them too, not "--resume 1".
_RUN_FLAGS = {"resume", "overwrite", "quiet", "no_lock", "no_prefix_sharing", "no_overlap",
              "megakernel", "batch_invariant", "no_tokens_in_results", "no_dataset_actions",
              "no_dataset_context"}


def _flags(options):
    argv = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if key in _RUN_FLAGS or isinstance(value, bool):
            if bool(value):
                argv.append(flag)
            elif _env_flag(key):  # False given: it wins over LOOM_<OPTION>, as typed it would
                argv.append(flag + "=false")
        else:
            argv += [flag, str(value)]
    return argv


def _drop(path):
    """Removes `path` if it is there."""
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _side_files(out):
    """The bytes of every side file (*.loom.json) beside `out`: what a run changes first."""
    folder = os.path.dirname(os.path.abspath(out))
    sides = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return sides
    for name in names:
        if name.endswith(".loom.json"):
            try:
                with open(os.path.join(folder, name), "rb") as f:
                    sides[name] = f.read()
            except OSError:
                pass
    return sides


def run(model, jobs, out, *, report=None, tokens_out=None, progress=None, binary=None,
        jobs_path=None, **options):
    """Runs `loom run --model MODEL --jobs JOBS --out OUT [OPTIONS]` and waits for it.

    `model`: a checkpoint folder or a loom.Model. `jobs`: a jobs file, or Jobs / dicts, which
    are written to `jobs_path` (default: OUT + ".jobs.jsonl"). A jobs file already there with
    other jobs (an earlier run's, which its results need to resume or merge) is replaced only
    with overwrite=True: else LoomError, before loom runs. `out` and `jobs` must be files
    ("-", stdout or stdin, is refused). `options`: any `loom run` option, `max_seqs=8` for
    `--max-seqs 8`, `resume=True` for `--resume` (False/None: left out); as in loom, those
    not given may come from LOOM_<OPTION> variables (LOOM_SHARD, LOOM_REPORT, ...), and the
    RunResult names the files loom wrote for them. loom's stderr (progress, summary) goes
    line by line to `progress`, a callable, or to sys.stderr when None; progress=False drops
    it. On Linux loom gets SIGTERM, and stops as on Ctrl-C, if this process dies.

    Returns a RunResult for exit 0 and exit 1 (`jobs_failed`: some jobs wrote error
    records); with a shard its `out` and `report` are the shard-tagged files loom wrote (for
    shard="auto" or "array", the shard loom resolved from the environment, as its banner
    says). Raises LoomError with loom's `loom: error:` line for exit 2 and any other failure,
    LoomInterrupted for exit 130.
    """
    from .jobs import OtherJobsError, write_jobs
    binary = find_loom(binary)
    written = None  # (jobs file written, its old bytes kept aside or None, side files before)
    model_path = os.fspath(getattr(model, "path", model))
    out = os.fspath(out)
    # A keyword wins over its LOOM_* variable, as the command line does in loom.
    report = os.fspath(report) if report is not None else _env("report")
    tokens_out = os.fspath(tokens_out) if tokens_out is not None else _env("tokens_out")
    shard = options.get("shard")
    shard = _env("shard") if shard is None else str(shard)
    overwrite = options.get("overwrite")
    overwrite = _env_flag("overwrite") if overwrite is None else bool(overwrite)
    quiet = options.get("quiet")
    quiet = _env_flag("quiet") if quiet is None else bool(quiet)
    if out == "-" or report == "-":
        raise ValueError(f'{"out" if out == "-" else "report"}="-" writes to stdout, where '
                         "loom.run cannot read it: give a file")
    for name, value in (("out", out), ("report", report), ("tokens_out", tokens_out)):
        if value == "":
            raise ValueError(f"{name}: expected a path, found an empty string")
    if isinstance(jobs, (str, os.PathLike)):
        jobs = os.fspath(jobs)
        if jobs == "-":
            raise ValueError('jobs="-" would read stdin, which loom.run does not pass to loom: '
                             "give a jobs file, or the jobs themselves")
    elif not hasattr(jobs, "__iter__") or isinstance(jobs, (bytes, dict)):
        raise TypeError(f"jobs: expected a jobs file path, or an iterable of Jobs, dicts or JSON "
                        f"lines; found {type(jobs).__name__}")
    else:
        target = os.fspath(jobs_path) if jobs_path is not None else out + ".jobs.jsonl"
        # A run loom refuses before it changes anything (its side files as they were) must not
        # leave these jobs in place of the old ones, whose results need them to resume.
        sides_before = _side_files(out)
        kept = target + f".before-{os.getpid()}" if os.path.isfile(target) else None
        if kept:
            try:
                os.link(target, kept)
            except OSError:
                shutil.copyfile(target, kept)
        try:
            jobs = write_jobs(target, jobs, overwrite=overwrite)
        except OtherJobsError:
            _drop(kept)
            raise LoomError(
                f"{target} holds other jobs (an earlier run's: its results need them to resume "
                "or merge); pass overwrite=True to replace them and that run's outputs, "
                "resume=True with the same jobs, or jobs_path= to write these elsewhere",
                command=None) from None
        except OSError as e:
            _drop(kept)
            raise LoomError(str(e)) from None
        written = (target, kept, sides_before)
    # loom resolves "auto" and "array" from the environment and names the shard in its banner,
    # which --quiet would hide: then loom runs with --quiet=false (which wins over LOOM_QUIET)
    # and only warnings and errors pass.
    resolving = shard in ("auto", "array")
    filter_quiet = resolving and quiet
    if filter_quiet:
        options = dict(options, quiet=None)
    command = [binary, "run", "--model", model_path, "--jobs", jobs, "--out", out]
    command += _flags({"report": report, "tokens_out": tokens_out, **options})
    if filter_quiet:
        command.append("--quiet=false")
    if progress is None:
        progress = lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush())  # noqa: E731
    tail = collections.deque(maxlen=40)
    error_line = message = None
    proc = subprocess.Popen(_launcher() + command, stdin=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    try:
        for line in proc.stderr:
            line = line.rstrip("\n")
            tail.append(line)
            if error_line is None:
                message = _error_message(line)
                if message is not None:
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
        if written:
            target, kept, sides_before = written
            if proc.returncode == 2 and _side_files(out) == sides_before:  # refused: as it was
                if kept:
                    os.replace(kept, target)
                else:
                    _drop(target)
            _drop(kept)
    parsed = _parse_shard(shard)
    shard = f"{parsed[0]}/{parsed[1]}" if parsed else shard  # "01/02" is shard 1/2
    if code in (0, 1):
        return RunResult(code, command, jobs, shard_path(out, shard), shard_path(report, shard),
                         tokens_out, shard)
    kind = LoomInterrupted if code == 130 else LoomError
    if code == 130 and error_line is None:  # loom's own words: what was kept, what to do
        for line in reversed(tail):
            text = line
            if line.startswith("{"):
                try:
                    text = str(json.loads(line).get("message", ""))
                except (ValueError, AttributeError):
                    continue
            if "stopped by a signal" in text:
                error_line, message = line, _STAMP.sub("", text.split("loom: ", 1)[-1]).strip()
                break
    if error_line is None:
        message = (f"loom was killed by signal {-code}" if code < 0
                   else f"loom exited with {code}")
    raise kind(message, code, error_line, "\n".join(tail), command)
