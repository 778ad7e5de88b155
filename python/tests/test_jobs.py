"""loom.Job refuses what loom refuses, with loom's message: every bad-job case of the CLI's
own tests (testdata/jobs/bad_tiny_v1.jsonl, tests/test_jobs.cpp) and jobs built from numpy
arrays are checked in Python and run through the CLI, and the messages must be equal."""
import json
import os
import re

import numpy as np

import loom
from support import ROOT, TESTDATA, TINY_LLAMA, TINY_V1, TempDirTest, cli_errors, cli_run, read

TINY_ACTION_TOKENS = os.path.join(TESTDATA, "tiny_action_tokens")

V1 = loom.Model(TINY_V1)  # P=10, A=3, action_dim 3, T=6, vocab 1000
LLAMA = loom.Model(TINY_LLAMA)  # plain, vocab 1000, max_position_embeddings 64
# P=8 image + A=3 action ids a frame, T=6 (66 positions), image ids [0, 480), vocab 512
TOKENS = loom.Model(TINY_ACTION_TOKENS)
# tests/test_jobs.cpp token_spec(): P=4, A=2, T=3 (18 positions), image ids [0, 90), vocab 100
TOKEN_SPEC = loom.Model.from_config({
    "architectures": ["LlamaActionTokensForCausalLM"], "vocab_size": 100,
    "num_image_patches": 4, "num_action_tokens": 2, "max_position_embeddings": 18,
    "image_vocab_size": 90})


def python_error(line, model):
    try:
        loom.Job.from_line(line, model=model)
    except loom.JobError as e:
        return e.message
    return None


def cpp_cases(table):
    """(line, message) of a BadCase table of tests/test_jobs.cpp, with its $F1/$A2 (and
    action-token $T1/$R2) shorthands expanded; cases written as escaped C strings ($FF, a byte
    that is not UTF-8) are left out."""
    text = read(ROOT, "tests", "test_jobs.cpp")
    start = text.index(f"const BadCase {table}[] = {{")
    body = text[start:text.index("\n};", start)]
    subs = {"$F1": "[1,2,3,4,5,6,7,8,9,10,-3,-3,-3]",
            "$A2": "[[0,1,0.5],[0,1,1],[0,1,1.5],[0,1,0.5],[0,1,1],[0,1,1.5]]",
            "$T1": "[1,2,3,4,90,91]", "$R2": "[[92,93],[94,95]]"}
    cases = []
    for line, message in re.findall(r'\{R"\((.*?)\)",\s*R"\((.*?)\)"\}', body, re.S):
        for k, v in subs.items():
            line = line.replace(k, v)
        cases.append((line, message))
    return cases


class CliMessages(TempDirTest):
    def compare(self, model, lines, expected=None, min_cases=1):
        """Each line loom refuses gets the same message from loom.Job.from_line; lines Python's
        json cannot read (broken JSON) are loom's alone and are counted out."""
        cli = cli_errors(model.path, lines, self.tmp)
        compared = 0
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError:
                continue
            with self.subTest(line=line[:100]):
                self.assertIn(n, cli, "loom accepted it")
                self.assertEqual(python_error(line, model), cli[n])
                if expected is not None:
                    self.assertEqual(cli[n], expected[n - 1])
                compared += 1
        self.assertGreaterEqual(compared, min_cases)

    def test_bad_tiny_v1_file(self):
        lines = read(TESTDATA, "jobs", "bad_tiny_v1.jsonl").splitlines()
        bad = {json.loads(l)["line"]
               for l in read(TESTDATA, "jobs", "bad_tiny_v1.expected.jsonl").splitlines()}
        good = [l for n, l in enumerate(lines, 1) if l.strip() and n not in bad]
        self.assertEqual(len(good), 4)
        for line in good:
            self.assertIsNone(python_error(line, V1), line)
        only_bad = [l if n in bad else "" for n, l in enumerate(lines, 1)]
        # 15 of its 16 bad lines (line 2 is broken JSON); 1e999 is read from the text as loom does.
        self.compare(V1, only_bad, min_cases=15)

    def unique(self, cases):
        # loom refuses a repeated id before anything else, so each case gets its own.
        return [re.sub(r'^\{"id":"([ap])",', lambda m: f'{{"id":"{m.group(1)}-{k}",', line)
                for k, (line, _) in enumerate(cases)]

    def test_cpp_frame_cases(self):
        cases = cpp_cases("kBadFrameJobs")
        self.assertGreater(len(cases), 50)
        self.compare(V1, self.unique(cases), [m for _, m in cases], min_cases=58)

    def test_cpp_plain_cases(self):
        cases = cpp_cases("kBadPlainJobs")
        self.assertGreater(len(cases), 10)
        self.compare(LLAMA, self.unique(cases), [m for _, m in cases], min_cases=len(cases))


def frames(n_ctx=1, P=10, seed=0):
    return np.random.default_rng(seed).integers(0, 999, size=(n_ctx, P), dtype=np.int64)


def actions(rows=6, dim=3):
    return np.linspace(-1, 1, rows * dim, dtype=np.float32).reshape(rows, dim)


class NumpyJobs(TempDirTest):
    """Jobs built from arrays: Python's error equals loom's on the line the Job writes (the
    JobError carries it), and the jobs Python accepts, loom runs."""

    def check(self, model, build):
        lines, messages = [], []
        for k, (name, make) in enumerate(build):
            try:
                job = make(f"np-{k}")
                lines.append(job.line)
                messages.append(None)
            except loom.JobError as e:
                self.assertIsNotNone(e.line, name)
                lines.append(e.line)
                messages.append(e.message)
        cli = cli_errors(model.path, lines, self.tmp)
        for n, ((name, _), message) in enumerate(zip(build, messages), 1):
            with self.subTest(case=name):
                self.assertEqual(message, cli.get(n))

    def test_frame_model(self):
        nan, inf = actions(), actions()
        nan[2, 1], inf[4, 0] = np.nan, np.inf
        ninf, big = actions().astype(np.float64), actions().astype(np.float64)
        ninf[1, 2], big[3, 1] = -np.inf, 1e39
        vocab, placeholder = frames(), frames()
        vocab[0, 3], placeholder[0, 7] = 1000, -3
        a3 = actions(6).reshape(2, 3, 3)
        J = lambda f, a, n, **kw: (lambda i: loom.Job(f, a, n, id=kw.pop("id", i), model=V1, **kw))
        self.check(V1, [
            ("good", J(frames(), actions(), 1, sampling={"temperature": 0.5, "seed": 3})),
            ("good: 3-D actions", J(frames(), a3, 1)),
            ("good: last frame's actions left out", J(frames(2), actions(6), 1)),
            ("good: numpy scalars", J(frames(), actions(9), np.int64(2), num_samples=np.int32(2),
                                      sampling={"seed": np.uint64(2**64 - 1)}, overlap=2)),
            ("good: integer id", J(frames(), actions(), 1, id=17)),
            ("good: uint64 and int32 ids", J(frames().astype(np.uint64), actions(), 1)),
            ("P too small", J(frames(P=9), actions(), 1)),
            ("no context frames", J(frames(0), actions(3), 1)),
            ("too many context frames", J(frames(7), actions(24), 1)),
            ("id past the vocabulary", J(vocab, actions(), 1)),
            ("placeholder in an image slot", J(placeholder, actions(), 1)),
            ("float image ids", J(frames().astype(np.float64), actions(), 1)),
            ("action rows", J(frames(), actions(5), 1)),
            ("action_dim", J(frames(), actions(6, 2), 1)),
            ("no actions", J(frames(), None, 1)),
            ("NaN action", J(frames(), nan, 1)),
            ("inf action", J(frames(), inf, 1)),
            ("-inf action", J(frames(), ninf, 1)),
            ("action past float range", J(frames(), big, 1)),
            ("num_frames 0", J(frames(), actions(), 0)),
            ("num_frames a string", J(frames(), actions(), "2")),
            ("num_frames a float", J(frames(), actions(9), 2.0)),
            ("num_samples 0", J(frames(), actions(), 1, num_samples=0)),
            ("num_samples too many", J(frames(), actions(), 1, num_samples=2000)),
            ("temperature", J(frames(), actions(), 1, sampling={"temperature": -1})),
            ("top_p", J(frames(), actions(), 1, sampling={"top_p": 0.0})),
            ("top_k", J(frames(), actions(), 1, sampling={"top_k": 1.5})),
            ("seed negative", J(frames(), actions(), 1, sampling={"seed": -1})),
            ("seed past 64 bits", J(frames(), actions(), 1, sampling={"seed": 2**64})),
            ("sampling key", J(frames(), actions(), 1, sampling={"temp": 1})),
            ("overlap", J(frames(), actions(), 1, overlap=6)),
            ("empty id", J(frames(), actions(), 1, id="")),
            ("float id", J(frames(), actions(), 1, id=1.5)),
            ("plain job on a frame model",
             lambda i: loom.Job.plain([1, 2, 3], 4, id=i, model=V1)),
        ])

    def test_plain_model(self):
        P = lambda ids, n, **kw: (lambda i: loom.Job.plain(ids, n, id=i, model=LLAMA, **kw))
        self.check(LLAMA, [
            ("good", P(np.array([1, 2, 3], dtype=np.int32), 4, ignore_eos=True)),
            ("good: 2-D prompt is flattened", P(np.array([[1, 2], [3, 4]]), 4)),
            ("prompt too long", P(np.arange(64), 1)),
            ("no prompt", P([], 1)),
            ("max_tokens past the positions", P([1, 2, 3], 62)),
            ("max_tokens 0", P([1, 2, 3], 0)),
            ("placeholder", P([1, -3, 3], 4)),
            ("ignore_eos", P([1, 2, 3], 4, ignore_eos="yes")),
            ("frame job on a plain model",
             lambda i: loom.Job(frames(), actions(3), 1, id=i, model=LLAMA)),
        ])

    def test_unchecked_without_a_model(self):
        job = loom.Job(frames(P=4), actions(6).reshape(2, 3, 3), 0)  # A from 3-D actions
        self.assertEqual(job.fields["prompt_token_ids"][4:7], [-3, -3, -3])
        self.assertEqual(job.fields["num_frames"], 0)
        with self.assertRaisesRegex(ValueError, "pass model="):
            loom.Job(frames(), actions(), 1)
        # [frames, A, dim] with another A than the model's: refused, not reshaped into rows
        # that a frame count happens to fit (3 frames of 2 rows read as 2 frames of 3).
        with self.assertRaisesRegex(ValueError, r"expected \[frames, A=3, action_dim\] for this "
                                                r"model, found shape \(3, 2, 3\)"):
            loom.Job(np.zeros((1, 10), int), np.zeros((3, 2, 3)), 2, model=V1)


class SameTokens(TempDirTest):
    def test_job_from_arrays_runs_like_the_hand_written_line(self):
        """Each job of testdata/jobs/tiny_v1.jsonl rebuilt with loom.Job from arrays (float32
        actions) writes the same prompt and generates the same tokens."""
        hand = [json.loads(l) for l in read(TESTDATA, "jobs", "tiny_v1.jsonl").splitlines()]
        built = []
        for h in hand:
            ids = np.array(h["prompt_token_ids"]).reshape(-1, 13)
            self.assertTrue((ids[:, 10:] == -3).all())
            job = loom.Job(ids[:, :10], np.array(h["actions"], dtype=np.float32), h["num_frames"],
                           sampling=h["sampling"], id="py-" + h["id"],
                           num_samples=h["num_samples"], model=V1)
            self.assertEqual(job.fields["prompt_token_ids"], h["prompt_token_ids"])
            built.append(job)
        jobs = loom.write_jobs(self.path("jobs.jsonl"), hand + built)
        code, err = cli_run(TINY_V1, jobs, self.path("out.jsonl"))
        self.assertEqual(code, 0, err)
        tokens = {(r.id, r.sample): r.frames for r in loom.read_results(self.path("out.jsonl"))}
        self.assertEqual(len(tokens), 2 * sum(h["num_samples"] for h in hand))
        for (id, sample), frames_ in tokens.items():
            if not id.startswith("py-"):
                np.testing.assert_array_equal(tokens[("py-" + id, sample)], frames_)


class ActionTokenJobs(TempDirTest):
    """Models whose actions are vocabulary ids (models/llama_action_tokens.json): loom.Job
    writes "action_token_ids" and refuses what loom refuses, with loom's message."""

    def test_architectures_are_the_tables(self):
        table = json.loads(read(ROOT, "models", "llama_action_tokens.json"))
        self.assertEqual(list(loom.jobs.ACTION_TOKEN_ARCHITECTURES), table["architectures"])
        self.assertTrue(TOKENS.action_ids)
        self.assertEqual((TOKENS.temporal_rows, TOKENS.image_ids), (6, (0, 480)))
        self.assertFalse(V1.action_ids)

    def test_cpp_action_token_cases(self):
        """Every case of test_jobs.cpp's kBadActionTokenJobs (its token_spec, no checkpoint)
        gets the C++ test's expected message."""
        cases = cpp_cases("kBadActionTokenJobs")
        self.assertGreaterEqual(len(cases), 17)
        for line, message in cases:
            with self.subTest(line=line[:100]):
                self.assertEqual(python_error(line, TOKEN_SPEC), message)

    def test_against_the_cli(self):
        """Jobs built from arrays for tiny_action_tokens: Python's error equals loom's record
        for the line the Job writes; the good ones loom accepts."""
        rng = np.random.default_rng(7)
        img = lambda n: rng.integers(0, 480, (n, 8))  # noqa: E731
        act = lambda n: rng.integers(480, 512, (n, 3))  # noqa: E731
        J = lambda f, a, rows, n, **kw: (  # noqa: E731
            lambda i: loom.Job.with_action_ids(f, a, rows, n, id=i, model=TOKENS, **kw))
        image_in_action = act(2)
        image_in_action[1, 2] = 479
        action_in_image = img(1)
        action_in_image[0, 5] = 480
        build = [
            ("good", J(img(2), act(2), act(3), 3, sampling={"temperature": 0.5, "seed": 3})),
            ("good: last row left out", J(img(1), act(1), act(2), 3, overlap=5)),
            ("good: one frame needs no row", J(img(6), act(6), None, 1)),
            ("good: numpy scalars", J(img(1), act(1), act(2), np.int64(2), num_samples=np.int32(2))),
            ("image id in an action slot", J(img(2), image_in_action, act(3), 3)),
            ("action id in an image slot", J(action_in_image, act(1), act(3), 3)),
            ("placeholder in an action slot", J(img(1), np.full((1, 3), -3), act(3), 3)),
            ("too many context frames", J(img(7), act(7), act(1), 1)),
            ("missing rows", J(img(1), act(1), None, 3)),
            ("too few rows", J(img(1), act(1), act(1), 3)),
            ("row too short", J(img(1), act(1), act(3)[:, :2], 3)),
            ("image id in a row", J(img(1), act(1), [[480, 481, 482], [3, 481, 482]], 3)),
            ("id past the vocabulary", J(img(1), act(1), [[480, 481, 512]], 2)),
            ("float id in a row", J(img(1), act(1), [[480, 481.0, 482]], 2)),
            ("overlap past T-1", J(img(1), act(1), act(2), 2, overlap=6)),
            ("action rows of numbers",
             lambda i: loom.Job(img(1), np.zeros((6, 3)), 1, id=i, model=TOKENS)),
        ]
        lines, messages = [], []
        for k, (name, make) in enumerate(build):
            try:
                lines.append(make(f"tok-{k}").line)
                messages.append(None)
            except loom.JobError as e:
                lines.append(e.line)
                messages.append(e.message)
        self.assertEqual(sum(m is None for m in messages), 4)
        cli = cli_errors(TOKENS.path, lines, self.tmp)
        for n, ((name, _), message) in enumerate(zip(build, messages), 1):
            with self.subTest(case=name):
                self.assertEqual(message, cli.get(n))
        self.assertEqual(messages[-2], 'field "overlap": expected an integer in [1, 5] (a round '
                                       "holds 6 frames), found 6")

    def test_job_from_arrays_runs_like_the_hand_written_line(self):
        """testdata/jobs/tiny_action_tokens.jsonl rebuilt with Job.with_action_ids writes the
        same prompt and rows and generates the same tokens."""
        hand = [json.loads(l) for l in read(TESTDATA, "jobs", "tiny_action_tokens.jsonl").splitlines()]
        built = []
        for h in hand:
            ids = np.array(h["prompt_token_ids"]).reshape(-1, 11)
            job = loom.Job.with_action_ids(ids[:, :8], ids[:, 8:], np.array(h["action_token_ids"]),
                                           h["num_frames"], sampling=h["sampling"],
                                           id="py-" + h["id"], num_samples=h["num_samples"],
                                           model=TOKENS)
            self.assertEqual(job.fields["prompt_token_ids"], h["prompt_token_ids"])
            self.assertEqual(job.fields["action_token_ids"], h["action_token_ids"])
            built.append(job)
        jobs = loom.write_jobs(self.path("jobs.jsonl"), hand + built)
        code, err = cli_run(TINY_ACTION_TOKENS, jobs, self.path("out.jsonl"))
        self.assertEqual(code, 0, err)
        tokens = {(r.id, r.sample): r.frames for r in loom.read_results(self.path("out.jsonl"))}
        self.assertEqual(len(tokens), 2 * sum(h.get("num_samples", 1) for h in hand))
        for (id, sample), frames_ in tokens.items():
            if not id.startswith("py-"):
                np.testing.assert_array_equal(tokens[("py-" + id, sample)], frames_)
