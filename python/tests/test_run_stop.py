"""loom stops with the Python process that started it: killed (SIGKILL, a Jupyter restart),
Python cannot pass on a signal, so loom gets SIGTERM from the kernel and stops cleanly."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import loom
from support import TINY_V1, TempDirTest

# A run of 400 jobs of 40 frames, 4 at a time: a minute on the CPU, so it is still running
# when its Python is killed.
CHILD = """
import sys
import numpy as np
import loom
model = loom.Model(sys.argv[1])
rng = np.random.default_rng(0)
jobs = [loom.Job(rng.integers(0, 999, (1, 10)), rng.uniform(-1, 1, (3 * 41, 3)), 40, id=i,
                 model=model) for i in range(400)]
loom.run(model, jobs, sys.argv[2], backend="cpu", max_seqs=4,
         progress=lambda line: print(line, flush=True))
"""


def running(pid):
    """True while the process runs (a zombie waiting for its new parent to reap it is done)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


class ParentDeath(TempDirTest):
    def test_loom_stops_when_its_python_is_killed(self):
        if not sys.platform.startswith("linux"):
            self.skipTest("the parent-death signal is Linux's")
        out = self.path("r.jsonl")
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(loom.__file__)))
        child = subprocess.Popen([sys.executable, "-c", CHILD, TINY_V1, out],
                                 stdout=subprocess.PIPE, text=True, env=env)
        pid = None
        try:
            for line in child.stdout:
                m = re.search(r"loom: version .*\bpid (\d+)", line)
                pid = int(m.group(1)) if m else pid
                if "KV pool" in line:  # generating: loom's signal handlers are in place
                    break
            self.assertIsNotNone(pid, "no banner from loom")
            time.sleep(0.3)
            child.kill()
            child.wait()
            deadline = time.monotonic() + 10
            while running(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertFalse(running(pid), "loom still runs after its Python was killed")
        finally:
            child.stdout.close()
            if child.poll() is None:
                child.kill()
                child.wait()
            if pid is not None and running(pid):
                os.kill(pid, signal.SIGKILL)
        with open(out + ".loom.json", encoding="utf-8") as f:
            self.assertEqual(json.load(f)["state"], "stopped")  # SIGTERM: stopped as by Ctrl-C
        records = list(loom.read_results(out))
        self.assertLess(len(records), 400)
        self.assertTrue(all(r.ok and r.frames.shape == (40, 10) for r in records))
