"""loom.run with what comes from elsewhere: options from LOOM_* variables, paths as
pathlib.Path, shards spelled "01/02", a jobs file already there, "-" for a path, and loom's
error lines in either log format."""
import json
import os
import pathlib
import stat
from unittest import mock

import numpy as np

import loom
from support import TINY_LLAMA, TINY_V1, TempDirTest, cli_run, read

V1 = loom.Model(TINY_V1)


def jobs(seed=0, n=4):
    rng = np.random.default_rng(seed)
    return [loom.Job(rng.integers(0, 999, (1, 10)), rng.uniform(-1, 1, (9, 3)), 2, id=i,
                     sampling={"seed": seed}, model=V1) for i in range(n)]


def ids(result):
    return sorted(r.id for r in result.results())


class OptionsFromTheEnvironment(TempDirTest):
    def run_v1(self, env, name="r.jsonl", **kw):
        with mock.patch.dict(os.environ, env):
            return loom.run(V1, jobs(), self.path(name), progress=False, **kw)

    def test_shard_tokens_out_and_report_from_variables(self):
        stale = loom.run(V1, jobs(), self.path("r.jsonl"), progress=False)  # an earlier run
        self.assertEqual(ids(stale), [0, 1, 2, 3])
        result = self.run_v1({"LOOM_SHARD": "1/2", "LOOM_TOKENS_OUT": self.path("ds"),
                              "LOOM_REPORT": self.path("rep.json")})
        self.assertEqual(result.out, self.path("r.shard-1-of-2.jsonl"))
        self.assertEqual(result.shard, "1/2")
        self.assertEqual(ids(result), [1, 3])  # the shard's records, not the earlier run's
        self.assertEqual(result.report, self.path("rep.shard-1-of-2.json"))
        self.assertEqual(json.loads(read(result.report))["generated"]["frames"], 4)
        self.assertEqual(result.tokens_out, self.path("ds"))
        self.assertEqual(sorted(m["id"] for _, _, m in result.dataset()), [1, 3])

    def test_a_keyword_wins_and_an_empty_variable_is_unset(self):
        result = self.run_v1({"LOOM_SHARD": "1/2"}, shard="0/2")
        self.assertEqual((result.out, ids(result)), (self.path("r.shard-0-of-2.jsonl"), [0, 2]))
        result = self.run_v1({"LOOM_SHARD": "", "LOOM_REPORT": "", "LOOM_TOKENS_OUT": ""},
                             name="e.jsonl")
        self.assertEqual((result.out, result.report, result.tokens_out, result.shard),
                         (self.path("e.jsonl"), None, None, None))
        self.assertEqual(ids(result), [0, 1, 2, 3])

    def test_loom_quiet_does_not_hide_the_resolved_shard(self):
        env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOOM_QUIET": "yes"}
        for shard_env in ({"LOOM_SHARD": "auto"}, {}):
            lines = []
            with mock.patch.dict(os.environ, dict(env, **shard_env)):
                result = loom.run(V1, jobs(), self.path("r.jsonl"), progress=lines.append,
                                  overwrite=True, **({} if shard_env else {"shard": "auto"}))
            self.assertEqual(result.out, self.path("r.shard-1-of-2.jsonl"))
            self.assertEqual(ids(result), [1, 3])
            self.assertIn("--quiet=false", result.command)
            self.assertFalse(any("loom: 2 jobs" in l for l in lines), lines)  # still quiet


class Paths(TempDirTest):
    def test_pathlib_report_and_tokens_out_with_a_shard(self):
        folder = pathlib.Path(self.tmp)
        result = loom.run(V1, jobs(), folder / "r.jsonl", report=folder / "rep.json",
                          tokens_out=folder / "ds", shard="0/2", progress=False)
        self.assertEqual(result.report, self.path("rep.shard-0-of-2.json"))
        self.assertTrue(os.path.isfile(result.report))
        self.assertEqual(result.tokens_out, self.path("ds"))
        self.assertEqual(len(result.dataset()), 2)

    def test_a_shard_with_leading_zeros(self):
        self.assertEqual(loom.shard_path("out/r.jsonl", "01/02"), "out/r.shard-1-of-2.jsonl")
        result = loom.run(V1, jobs(), self.path("r.jsonl"), shard="01/02", progress=False)
        self.assertEqual(result.out, self.path("r.shard-1-of-2.jsonl"))
        self.assertEqual((result.shard, ids(result)), ("1/2", [1, 3]))

    def test_stdout_and_stdin_are_refused(self):
        with self.assertRaisesRegex(ValueError, 'out="-" writes to stdout'):
            loom.run(V1, jobs(), "-", progress=False)
        with self.assertRaisesRegex(ValueError, 'jobs="-" would read stdin'):
            loom.run(V1, "-", self.path("r.jsonl"), progress=False)
        self.assertEqual(os.listdir(self.tmp), [])


class JobsFile(TempDirTest):
    def test_a_refused_run_keeps_the_jobs_of_the_results_there(self):
        out = self.path("r.jsonl")
        first = loom.run(V1, jobs(0), out, progress=False)
        written = read(first.jobs)
        before = os.stat(first.jobs)
        with self.assertRaises(loom.LoomError) as caught:
            loom.run(V1, jobs(1), out, progress=False)  # neither resume nor overwrite
        e = caught.exception
        self.assertIsNone(e.exit_code)
        self.assertRegex(e.message, r"r\.jsonl\.jobs\.jsonl holds other jobs.*overwrite=True.*"
                                    r"jobs_path=")
        self.assertEqual(read(first.jobs), written)
        # The same jobs again: the file is left as it is (resume needs its lines).
        resumed = loom.run(V1, jobs(0), out, resume=True, progress=False)
        self.assertEqual(resumed.exit_code, 0)
        after = os.stat(first.jobs)
        self.assertEqual((after.st_ino, after.st_mtime_ns), (before.st_ino, before.st_mtime_ns))
        # overwrite=True replaces the jobs with the results.
        again = loom.run(V1, jobs(1), out, overwrite=True, progress=False)
        self.assertEqual(read(again.jobs), "".join(j.line + "\n" for j in jobs(1)))
        with mock.patch.dict(os.environ, {"LOOM_OVERWRITE": "1"}):  # as loom reads it
            loom.run(V1, jobs(2), out, progress=False)
        self.assertEqual(read(again.jobs), "".join(j.line + "\n" for j in jobs(2)))

    def test_jobs_of_a_run_loom_refuses_are_not_left_in_place(self):
        out = self.path("r.jsonl")
        first = loom.run(V1, jobs(0), out, tokens_out=self.path("ds"), progress=False)
        written = read(first.jobs)
        # loom refuses this --overwrite before it changes anything (the old dataset would go on
        # naming replaced records): the jobs file still holds the jobs of the results there.
        with self.assertRaisesRegex(loom.LoomError, "--overwrite: --out .* was written with "
                                                    "--tokens-out"):
            loom.run(V1, jobs(1), out, overwrite=True, progress=False)
        self.assertEqual(read(first.jobs), written)
        self.assertEqual(loom.run(V1, jobs(0), out, tokens_out=self.path("ds"), resume=True,
                                  progress=False).exit_code, 0)
        # A refused first run leaves no jobs file to block the corrected one.
        fresh = self.path("new", "r.jsonl")
        with self.assertRaises(loom.LoomError):
            loom.run(V1, jobs(2), fresh, max_seqs=0, progress=False)
        self.assertFalse(os.path.exists(fresh + ".jobs.jsonl"))
        self.assertEqual(loom.run(V1, jobs(3), fresh, progress=False).exit_code, 0)
        self.assertEqual([n for n in os.listdir(self.tmp) if ".before-" in n], [])

    def test_flags_false_win_over_variables_and_paths_are_checked(self):
        out = self.path("r.jsonl")
        lines = []
        with mock.patch.dict(os.environ, {"LOOM_QUIET": "1"}):
            result = loom.run(V1, jobs(), out, quiet=False, progress=lines.append)
        self.assertTrue(any("results in" in line for line in lines))  # not quiet
        self.assertEqual(loom.run(V1, jobs(), out, resume=1, quiet=0, progress=False).exit_code, 0)
        self.assertEqual(result.exit_code, 0)
        for kw, what in ((dict(report="-"), 'report="-"'), (dict(tokens_out=""), "tokens_out: "
                                                                                 "expected a path")):
            with self.assertRaisesRegex(ValueError, what):
                loom.run(V1, jobs(), self.path("x.jsonl"), progress=False, **kw)
        with self.assertRaisesRegex(TypeError, "jobs: expected a jobs file path.*found int"):
            loom.run(V1, 5, self.path("x.jsonl"), progress=False)

    def test_permissions_follow_the_umask(self):
        for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
            old = os.umask(umask)
            try:
                path = loom.write_jobs(self.path(f"jobs-{umask:o}.jsonl"), jobs())
            finally:
                os.umask(old)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), mode)
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".")], [])

    def test_bad_paths_say_why(self):
        open(self.path("file"), "w").close()
        os.mkdir(self.path("folder"))
        for where, why in ((self.path("file", "jobs.jsonl"), "cannot make its folder"),
                           (self.path("folder"), "it is a folder")):
            with self.subTest(where=where):
                with self.assertRaisesRegex(loom.LoomError, f"jobs file {where}: .*{why}"):
                    loom.run(V1, jobs(), self.path("r.jsonl"), jobs_path=where, progress=False)
                with self.assertRaisesRegex(OSError, why):
                    loom.write_jobs(where, jobs())
        self.assertFalse(os.path.exists(self.path("r.jsonl")))


class ErrorLines(TempDirTest):
    def test_json_log_lines(self):
        out = loom.run(V1, jobs(), self.path("r.jsonl"), progress=False).out
        _, stderr = cli_run(TINY_V1, self.path("r.jsonl.jobs.jsonl"), out)
        text = stderr.strip()[len("loom: error: "):]
        for how in ({"log_format": "json"}, {"env": {"LOOM_LOG_FORMAT": "json"}}):
            with self.subTest(how=how), mock.patch.dict(os.environ, how.get("env", {})):
                with self.assertRaises(loom.LoomError) as caught:
                    loom.run(V1, jobs(), out, progress=False, log_format=how.get("log_format"))
                e = caught.exception
                self.assertEqual(e.exit_code, 2)
                self.assertEqual(e.message, text)
                self.assertEqual(json.loads(e.line)["level"], "error")

    def test_the_time_stamp_after_an_error_is_not_the_message(self):
        for name, line in (("a", '{"id":1,"prompt_token_ids":[1,2],"max_tokens":2}'),
                           ("b", '{"id":1,"prompt_token_ids":[1,3],"max_tokens":2}')):
            with open(self.path(name), "w") as f:
                f.write(line + "\n")
        loom.run(TINY_LLAMA, self.path("a"), self.path("r.jsonl"), progress=False)
        with self.assertRaises(loom.LoomError) as caught:  # another jobs file: after the banner
            loom.run(TINY_LLAMA, self.path("b"), self.path("r.jsonl"), resume=True,
                     progress=False)
        e = caught.exception
        self.assertRegex(e.line, r"^loom: error: .*--resume needs the same jobs file.* \[\d{4}-"
                                 r"\d\d-\d\dT[\d:.]+Z \+0:00:\d\d\.\d\]$")
        self.assertEqual(e.message, e.line[len("loom: error: "):e.line.rindex(" [")])
        self.assertTrue(e.message.endswith("(or write to a new --out)"), e.message)
