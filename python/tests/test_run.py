"""loom.run: the command it builds, progress passed through, exit 1 as a flag, fatal errors as
exceptions carrying loom's own `loom: error:` line."""
import io
import json
import os
import stat
import sys
from unittest import mock

import numpy as np

import loom
from support import TINY_V1, TempDirTest, cli_run, read


def tiny_jobs(model, n=3):
    rng = np.random.default_rng(1)
    return [loom.Job(rng.integers(0, 999, (1 + i % 2, 10)), rng.uniform(-1, 1, (3 * (3 + i % 2), 3)),
                     2, sampling={"temperature": 0.8, "seed": i}, id=i if i % 2 else f"job-{i}",
                     model=model)
            for i in range(n)]


def error_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("loom: error:")]


class Run(TempDirTest):
    def test_run_returns_paths_and_streams_progress(self):
        model = loom.Model(TINY_V1)
        lines = []
        result = loom.run(model, tiny_jobs(model), self.path("out", "r.jsonl"),
                          report=self.path("out", "report.json"), progress=lines.append)
        self.assertEqual(result.exit_code, 0)
        self.assertFalse(result.jobs_failed)
        self.assertEqual(result.jobs, self.path("out", "r.jsonl.jobs.jsonl"))
        self.assertEqual(len(read(result.jobs).splitlines()), 3)
        self.assertIn("--report", result.command)
        # loom's summary line came through the callback (stamped with the time: not a terminal).
        self.assertTrue(any("loom: 3 jobs" in l for l in lines), lines)
        report = json.loads(read(result.report))
        self.assertEqual(report["generated"]["frames"], 6)
        records = list(result.results())
        self.assertEqual([r.id for r in records if r.ok].count(1), 1)  # an int id stays an int
        self.assertEqual(sorted(map(str, (r.id for r in records))), ["1", "job-0", "job-2"])
        for r in records:
            self.assertEqual(r.frames.shape, (2, 10))

    def test_progress_goes_to_stderr_by_default(self):
        model = loom.Model(TINY_V1)
        with mock.patch.object(sys, "stderr", io.StringIO()) as err:
            loom.run(TINY_V1, tiny_jobs(model, 1), self.path("r.jsonl"))
        self.assertIn("loom: 1 jobs", err.getvalue())
        with mock.patch.object(sys, "stderr", io.StringIO()) as err:
            loom.run(TINY_V1, tiny_jobs(model, 1), self.path("r.jsonl"), overwrite=True,
                     quiet=True, resume=False, progress=None)
        self.assertEqual(err.getvalue(), "")

    def test_some_jobs_failed_is_a_flag(self):
        model = loom.Model(TINY_V1)
        good = tiny_jobs(model, 1)[0]
        bad = dict(good.to_dict(), id="bad", num_frames=0)
        with self.assertRaises(loom.JobError) as caught:
            loom.Job.from_dict(bad, model=model)
        result = loom.run(TINY_V1, [good, bad], self.path("r.jsonl"), progress=False)
        self.assertEqual(result.exit_code, 1)
        self.assertTrue(result.jobs_failed)
        errors = list(result.errors())
        self.assertEqual([(e.id, e.line) for e in errors], [("bad", 2)])
        self.assertEqual(errors[0].message, caught.exception.message)
        self.assertEqual(errors[0].error, "line 2: " + caught.exception.message)

    def test_fatal_errors_carry_loom_s_line(self):
        jobs = loom.write_jobs(self.path("jobs.jsonl"), tiny_jobs(loom.Model(TINY_V1), 1))
        cases = [
            ("missing model", dict(model=self.path("nowhere"))),
            ("out exists", dict(out=jobs)),  # neither --resume nor --overwrite
            ("bad option value", dict(options={"max_seqs": 0})),
            ("unknown option", dict(options={"frobnicate": 1})),
        ]
        for name, case in cases:
            with self.subTest(case=name):
                model = case.get("model", TINY_V1)
                out = case.get("out", self.path("r.jsonl"))
                options = case.get("options", {})
                with self.assertRaises(loom.LoomError) as caught:
                    loom.run(model, jobs, out, progress=False, **options)
                e = caught.exception
                argv = [a for k, v in options.items() for a in ("--" + k.replace("_", "-"), str(v))]
                code, stderr = cli_run(model, jobs, out, *argv)
                self.assertEqual(e.exit_code, code)
                self.assertEqual(e.exit_code, 2)
                if error_lines(stderr):  # loom's own line, the same as from the shell
                    self.assertEqual(e.line, error_lines(stderr)[0])
                    self.assertEqual(str(e), e.line)
                    self.assertEqual(e.message, e.line[len("loom: error: "):])
                else:  # CLI11's parse errors have no `loom: error:` line yet
                    self.assertIn(stderr.strip().splitlines()[0], e.stderr)
        self.assertFalse(os.path.exists(self.path("r.jsonl")))

    def test_shard_path(self):
        for path, shard, want in [("out/r.jsonl", "1/4", "out/r.shard-1-of-4.jsonl"),
                                  ("out.d/results", "0/2", "out.d/results.shard-0-of-2"),
                                  ("r.jsonl", "0/1", "r.jsonl"), ("-", "0/2", "-"),
                                  ("r.jsonl", "auto", "r.jsonl"), ("r.jsonl", None, "r.jsonl")]:
            self.assertEqual(loom.shard_path(path, shard), want)

    def test_shard_from_the_environment(self):
        # torchrun's variables: --shard auto resolves 1/2, and the result names that shard's
        # files, also with quiet=True (the banner naming the shard is read, not passed on).
        model = loom.Model(TINY_V1)
        env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}
        for quiet in (False, True):
            lines = []
            with mock.patch.dict(os.environ, env):
                result = loom.run(model, tiny_jobs(model, 4), self.path(f"q{quiet}", "r.jsonl"),
                                  report=self.path(f"q{quiet}", "rep.json"), shard="auto",
                                  quiet=quiet, progress=lines.append)
            self.assertEqual(result.out, self.path(f"q{quiet}", "r.shard-1-of-2.jsonl"))
            self.assertEqual(result.report, self.path(f"q{quiet}", "rep.shard-1-of-2.json"))
            self.assertEqual(sorted(r.id for r in result.results()), [1, 3])  # every 2nd job
            self.assertEqual(any("loom: 2 jobs" in l for l in lines), not quiet, lines)

    def test_interrupted_run(self):
        fake = self.path("loom")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\n[ "$1" = --version ] && { echo "loom 9.1"; exit 0; }\n'
                    'echo "2026-12-05T07:38:59.635Z +0:00:03.0 loom: stopped by a signal; 2 '
                    'samples read were not written (1 running, with 30 of the tokens above; 1 '
                    'waiting to start); --resume runs them" >&2\nexit 130\n')
        os.chmod(fake, stat.S_IRWXU)
        with self.assertRaises(loom.LoomInterrupted) as caught:
            loom.run(TINY_V1, self.path("jobs.jsonl"), self.path("r.jsonl"), binary=fake,
                     progress=False)
        self.assertEqual(caught.exception.exit_code, 130)
        self.assertIn("stopped by a signal", caught.exception.stderr)
        # loom's words, not "loom exited with 130".
        self.assertEqual(caught.exception.message,
                         "stopped by a signal; 2 samples read were not written (1 running, with "
                         "30 of the tokens above; 1 waiting to start); --resume runs them")
