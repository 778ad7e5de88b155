"""Finding loom (LOOM_BIN, then PATH), its --version check, and `pip install ./python`."""
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
from unittest import mock

import loom
from support import ROOT, TempDirTest


class FindLoom(TempDirTest):
    def fake(self, version_output, name="loom"):
        path = self.path(name)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\nprintf '{version_output}'\n")
        os.chmod(path, stat.S_IRWXU)
        return path

    def test_the_built_binary(self):
        binary = os.environ.get("LOOM_BIN")
        if not binary:
            self.skipTest("LOOM_BIN is not set")
        self.assertEqual(loom.find_loom(), binary)
        first = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
        version = loom.loom_version(binary)
        self.assertTrue(first.startswith("loom " + ".".join(map(str, version))), first)
        self.assertGreaterEqual(version, loom.MIN_VERSION)

    def test_versions(self):
        several_lines = self.fake(r"loom 0.2.0\ncommit 1234abc (dirty)\nbuild Release\n", "a")
        self.assertEqual(loom.loom_version(several_lines), (0, 2, 0))
        self.assertEqual(loom.find_loom(several_lines), several_lines)
        old = self.fake(r"loom 0.0.9\n", "b")
        with self.assertRaisesRegex(loom.LoomError, r"is loom 0\.0\.9; this package needs loom >="):
            loom.find_loom(old)
        other = self.fake(r"something 1.0\n", "c")
        with self.assertRaisesRegex(loom.LoomError, "expected 'loom <version>'"):
            loom.find_loom(other)

    def test_loom_bin_then_path(self):
        on_path = self.fake(r"loom 1.0\n")
        with mock.patch.dict(os.environ, {"PATH": self.tmp}):
            os.environ.pop("LOOM_BIN", None)
            self.assertEqual(loom.find_loom(), on_path)
            os.environ["LOOM_BIN"] = self.path("missing")
            with self.assertRaisesRegex(loom.LoomError, "LOOM_BIN names .*missing, which is not"):
                loom.find_loom()
        with mock.patch.dict(os.environ, {"PATH": os.path.join(self.tmp, "empty")}):
            os.environ.pop("LOOM_BIN", None)
            with self.assertRaisesRegex(loom.LoomError, "set LOOM_BIN"):
                loom.find_loom()


class PipInstall(TempDirTest):
    def test_pip_install_offline(self):
        """`pip install ./python` builds offline with the system's setuptools (a copy, so the
        build leaves nothing in the source tree) and the installed package imports alone."""
        if not all(importlib.util.find_spec(m) for m in ("pip", "setuptools", "wheel")):
            self.skipTest("pip, setuptools or wheel is missing")
        src = self.path("src")
        shutil.copytree(os.path.join(ROOT, "python"), src,
                        ignore=shutil.ignore_patterns("tests", "__pycache__"))
        target = self.path("site")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-build-isolation", "--no-index", "--no-deps", "--target", target, src],
                       check=True, capture_output=True, timeout=120)
        env = dict(os.environ, PYTHONPATH=target)
        p = subprocess.run([sys.executable, "-c", "import loom, loom.dataset, loom.jobs, "
                            "loom.results, loom.runner; print(loom.__file__, loom.__version__)"],
                           capture_output=True, text=True, env=env, cwd=self.tmp, check=True)
        path, version = p.stdout.split()
        self.assertTrue(path.startswith(target), path)
        self.assertEqual(version, loom.__version__)
        meta = [n for n in os.listdir(target) if n.endswith(".dist-info")]
        with open(os.path.join(target, meta[0], "METADATA")) as f:
            requires = [l.split(":", 1)[1].strip() for l in f if l.startswith("Requires-Dist")]
        self.assertEqual([r for r in requires if "extra" not in r], ["numpy", "safetensors"])
