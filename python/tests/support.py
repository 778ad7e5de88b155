"""Shared by the tests: the repository's test data, the loom binary, and loom run directly."""
import json
import os
import subprocess
import tempfile
import unittest

import loom

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTDATA = os.path.join(ROOT, "testdata")
TINY_V1 = os.path.join(TESTDATA, "tiny_v1")
TINY_LLAMA = os.path.join(TESTDATA, "tiny_llama")

# The run options loom may read from LOOM_* variables must not leak into the tests.
for name in list(os.environ):
    if name.startswith("LOOM_") and name != "LOOM_BIN":
        del os.environ[name]


def read(*names):
    with open(os.path.join(*names), encoding="utf-8") as f:
        return f.read()


def loom_bin():
    return loom.find_loom()


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="loom-py-")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.tmp, *names)


def cli_run(model, jobs_path, out, *args):
    """loom run straight from the shell (no package code): its exit code and stderr."""
    p = subprocess.run([loom_bin(), "run", "--model", model, "--jobs", jobs_path, "--out", out,
                        "--quiet", *args], capture_output=True, text=True)
    return p.returncode, p.stderr


def cli_errors(model, lines, folder):
    """Runs loom on these job lines; {line number: error message without "line N: "}."""
    jobs = os.path.join(folder, "cli-jobs.jsonl")
    out = os.path.join(folder, "cli-results.jsonl")
    with open(jobs, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    code, stderr = cli_run(model, jobs, out, "--overwrite")
    assert code in (0, 1), stderr
    errors = {}
    with open(out, encoding="utf-8") as f:
        for raw in f:
            r = json.loads(raw)
            if r["status"] == "error":
                prefix = f"line {r['line']}: "
                assert r["error"].startswith(prefix), r["error"]
                errors[r["line"]] = r["error"][len(prefix):]
    return errors
