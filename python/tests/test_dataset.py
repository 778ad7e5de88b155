"""loom.Dataset reads back, sample by sample, what the results file of the same run says:
frames, actions, context, ids; merged and unmerged shard folders; plain models; PyTorch."""
import json
import re
import os
import shutil
import subprocess
import warnings

import numpy as np

import loom
from support import TESTDATA, TINY_LLAMA, TINY_V1, TempDirTest, loom_bin, read


def frame_jobs(model):
    """Jobs of 1-2 context frames and 2-3 frames, some with the last frame's actions left
    out, int and str ids, two with 2 samples."""
    rng = np.random.default_rng(7)
    jobs = []
    for i in range(6):
        n_ctx, n = 1 + i % 2, 2 + i % 3 // 2
        rows = 3 * (n_ctx + n) - (3 if i % 3 == 0 else 0)
        jobs.append(loom.Job(rng.integers(0, 999, (n_ctx, 10)),
                             rng.uniform(-2, 2, (rows, 3)).astype(np.float32), n,
                             sampling={"temperature": 1.0, "seed": i}, id=i if i % 2 else f"j{i}",
                             num_samples=2 if i in (1, 4) else None, model=model))
    return jobs


def key(id, sample):
    return (str(id), sample)


class DatasetMatchesResults(TempDirTest):
    def setUp(self):
        super().setUp()
        self.model = loom.Model(TINY_V1)
        self.jobs = {str(j.id): j for j in frame_jobs(self.model)}

    def run_v1(self, name, **options):
        return loom.run(self.model, list(self.jobs.values()), self.path(name, "results.jsonl"),
                        tokens_out=self.path(name, "dataset"), progress=False, **options)

    def check_sample(self, record_frames, frames, actions, meta, context):
        job = self.jobs[str(meta["id"])].fields
        self.assertEqual(frames.dtype, np.int32)
        np.testing.assert_array_equal(frames, record_frames)
        # The action rows after each generated frame, NaN where the job gave none.
        n_ctx = meta["context_frames"]
        want = np.full((meta["num_frames"] * 3, 3), np.nan, dtype=np.float32)
        given = np.array(job["actions"], dtype=np.float32)[n_ctx * 3:]
        want[:len(given)] = given
        np.testing.assert_array_equal(actions, want.reshape(-1, 3, 3))
        prompt = np.array(job["prompt_token_ids"]).reshape(n_ctx, 13)
        np.testing.assert_array_equal(context[0], prompt[:, :10])
        np.testing.assert_array_equal(
            context[1], np.array(job["actions"], dtype=np.float32)[:n_ctx * 3].reshape(-1, 3, 3))

    def test_dataset_equals_results(self):
        result = self.run_v1("a", samples_per_file=3)
        records = {key(r.id, r.sample): r for r in result.results()}
        self.assertEqual(len(records), 8)
        ds = result.dataset()
        self.assertEqual(len(ds), 8)
        self.assertGreater(len({e["file"] for e in ds.entries()}), 2)  # several files
        manifest = [json.loads(l) for l in read(result.tokens_out, "manifest.jsonl").splitlines()]
        for i, (frames, actions, meta) in enumerate(ds):
            self.assertEqual(meta, manifest[i])  # manifest order, ids with their JSON type
            r = records[key(meta["id"], meta["sample"])]
            self.assertEqual(meta["id"], r.id)
            self.assertEqual((meta["file"], tuple(meta["rows"])), (r.tokens_file, r.rows))
            self.check_sample(r.frames, frames, actions, meta, ds.context(i))
            again = ds[i - len(ds)]  # random access, negative index
            np.testing.assert_array_equal(again[0], frames)
            self.assertEqual(again[2], meta)
        self.assertEqual(sum(isinstance(e["id"], int) for e in manifest), 4)
        with self.assertRaises(IndexError):
            ds[8]

        # The same jobs again without tokens in the records: the dataset alone holds them.
        lean = self.run_v1("b", no_tokens_in_results=True, no_dataset_context=True,
                           no_dataset_actions=True)
        for r in lean.results():
            self.assertIsNone(r.frames)
            self.assertIsNotNone(r.tokens_file)
        lean_ds = lean.dataset()
        self.assertEqual(len(lean_ds), 8)
        for i, (frames, actions, meta) in enumerate(lean_ds):
            np.testing.assert_array_equal(frames, records[key(meta["id"], meta["sample"])].frames)
            self.assertIsNone(actions)
            self.assertEqual(lean_ds.context(i), (None, None))

    def test_shards_before_and_after_merge(self):
        out, folder = self.path("results.jsonl"), self.path("dataset")
        records = {}
        for k in (1, 0):  # shard 1 first: the reading order must not follow the writing order
            result = loom.run(self.model, list(self.jobs.values()), out, tokens_out=folder,
                              shard=f"{k}/2", jobs_path=self.path("jobs.jsonl"), progress=False)
            self.assertEqual(result.out, self.path(f"results.shard-{k}-of-2.jsonl"))
            for r in result.results():
                records[key(r.id, r.sample)] = r
        self.assertEqual(len(records), 8)

        unmerged = loom.Dataset(folder)
        self.assertEqual([os.path.basename(p) for p in unmerged.manifests],
                         ["manifest.shard-0-of-2.jsonl", "manifest.shard-1-of-2.jsonl"])
        self.assertEqual(unmerged.info["shard"], {"index": 0, "count": 2})
        shard_lines = [json.loads(l) for k in (0, 1)
                       for l in read(folder, f"manifest.shard-{k}-of-2.jsonl").splitlines()]
        self.assertEqual(list(unmerged.entries()), shard_lines)
        self.assertEqual(len(unmerged), 8)
        for i, (frames, actions, meta) in enumerate(unmerged):
            self.check_sample(records[key(meta["id"], meta["sample"])].frames, frames, actions,
                              meta, unmerged.context(i))

        self.assertEqual(unmerged.check_files(), [])  # SHA256SUMS.shard-K-of-2 lines

        subprocess.run([loom_bin(), "merge", "--dataset", folder], check=True,
                       capture_output=True)
        merged = loom.Dataset(folder)
        self.assertEqual(merged.check_files(), [])
        self.assertEqual(merged.manifests, [os.path.join(folder, "manifest.jsonl")])
        self.assertEqual(merged.info["state"], "complete")
        self.assertEqual(sorted(key(e["id"], e["sample"]) for e in merged.entries()),
                         sorted(records))
        for i, (frames, actions, meta) in enumerate(merged):
            self.check_sample(records[key(meta["id"], meta["sample"])].frames, frames, actions,
                              meta, merged.context(i))
        # A byte changed in a data file, another file gone: each said.
        first, second = sorted({e["file"] for e in merged.entries()})[:2]
        with open(os.path.join(folder, first), "r+b") as f:
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([last[0] ^ 0xFF]))
        os.remove(os.path.join(folder, second))
        problems = merged.check_files()
        self.assertEqual(len(problems), 2, problems)
        self.assertIn(f"{first}: SHA-256 ", problems[0] if first < second else problems[1])
        self.assertIn(f"{second}: missing", problems)

    def test_a_line_being_written_is_left_out(self):
        result = self.run_v1("a")
        copy = self.path("copy")
        shutil.copytree(result.tokens_out, copy)
        with open(os.path.join(copy, "manifest.jsonl"), "a") as f:
            f.write('{"id":"half-writ')
        with open(result.out, "a") as f:
            f.write('{"id":"half-writ')
        self.assertEqual(len(loom.Dataset(copy)), 8)
        self.assertEqual(len(list(loom.Dataset(copy))), 8)
        self.assertEqual(len(list(loom.read_results(result.out))), 8)

    def test_not_a_dataset(self):
        with self.assertRaisesRegex(FileNotFoundError, "no manifest.jsonl"):
            loom.Dataset(self.tmp)


class PlainDataset(TempDirTest):
    def test_plain_model_gives_flat_tokens(self):
        jobs = os.path.join(TESTDATA, "jobs", "tiny_llama.jsonl")
        result = loom.run(TINY_LLAMA, jobs, self.path("r.jsonl"), tokens_out=self.path("ds"),
                          progress=False)
        self.assertEqual(result.exit_code, 0)
        records = {key(r.id, r.sample): r for r in result.results()}
        prompts = {json.loads(l)["id"]: json.loads(l)["prompt_token_ids"]
                   for l in read(jobs).splitlines()}
        ds = result.dataset()
        self.assertEqual(len(ds), len(records))
        for i, (tokens, actions, meta) in enumerate(ds):
            r = records[key(meta["id"], meta["sample"])]
            self.assertEqual(tokens.ndim, 1)
            np.testing.assert_array_equal(tokens, r.tokens)
            self.assertEqual(meta["num_tokens"], len(r.tokens))
            self.assertIsNone(actions)
            context, context_actions = ds.context(i)
            np.testing.assert_array_equal(context, prompts[meta["id"]])
            self.assertIsNone(context_actions)


class ActionTokenDataset(TempDirTest):
    def test_action_ids_come_back_per_frame(self):
        jobs = os.path.join(TESTDATA, "jobs", "tiny_action_tokens.jsonl")
        result = loom.run(os.path.join(TESTDATA, "tiny_action_tokens"), jobs, self.path("r.jsonl"),
                          tokens_out=self.path("ds"), progress=False)
        self.assertEqual(result.exit_code, 0)
        given = {json.loads(l)["id"]: json.loads(l) for l in read(jobs).splitlines()}
        ds = result.dataset()
        self.assertGreater(len(ds), 0)
        for i, (frames, actions, meta) in enumerate(ds):
            job = given[meta["id"]]
            self.assertEqual(actions.dtype, np.int32)
            want = np.full((meta["num_frames"], 3), -1, dtype=np.int32)
            ids = np.array(job["action_token_ids"], dtype=np.int32)
            want[:len(ids)] = ids[:meta["num_frames"]]
            np.testing.assert_array_equal(actions, want)
            _, context_actions = ds.context(i)
            prompt = np.array(job["prompt_token_ids"]).reshape(-1, 11)  # 8 image + 3 action slots
            np.testing.assert_array_equal(context_actions, prompt[:, 8:])


class TorchAdapter(TempDirTest):
    def test_workers_and_ranks_read_every_sample_once(self):
        try:
            import torch
            from torch.utils.data import DataLoader
        except ImportError:
            self.skipTest("torch is not importable")
        from loom.torch import TokenIterableDataset
        model = loom.Model(TINY_V1)
        result = loom.run(model, frame_jobs(model), self.path("r.jsonl"),
                          tokens_out=self.path("ds"), progress=False)
        want = {key(m["id"], m["sample"]): f for f, _, m in result.dataset()}

        def read_all(dataset, workers):
            seen = []
            for frames, actions, meta in DataLoader(dataset, batch_size=None, num_workers=workers):
                self.assertIsInstance(frames, torch.Tensor)
                self.assertEqual(tuple(actions.shape), (frames.shape[0], 3, 3))
                np.testing.assert_array_equal(frames.numpy(), want[key(meta["id"], meta["sample"])])
                seen.append(key(meta["id"], meta["sample"]))
            return seen

        seen = read_all(TokenIterableDataset(result.tokens_out), 2)
        self.assertEqual(sorted(seen), sorted(want))
        ranks = [read_all(TokenIterableDataset(result.tokens_out, rank=r, world_size=2), 2)
                 for r in (0, 1)]
        self.assertEqual(sorted(ranks[0] + ranks[1]), sorted(want))
        self.assertTrue(ranks[0] and ranks[1])


class CorruptLines(TempDirTest):
    def test_a_bad_line_is_named_by_file_and_line(self):
        root = self.path("ds")
        os.makedirs(root)
        manifest = os.path.join(root, "manifest.jsonl")
        with open(manifest, "w") as f:
            f.write('{"file": "data-000000.safetensors", "rows": [0, 2]}\ngarbage\n')
        with open(os.path.join(root, "dataset.json"), "w") as f:
            json.dump({"format": "loom-dataset", "state": "complete"}, f)
        ds = loom.Dataset(root)
        with self.assertRaisesRegex(ValueError, re.escape(manifest) + " sample 1: not a "
                                                "manifest entry"):
            ds.entry(1)
        with self.assertRaisesRegex(ValueError, re.escape(manifest) + " line 2: not a "
                                                "manifest entry"):
            list(ds.entries())
        results = self.path("r.jsonl")
        with open(results, "w") as f:
            f.write('{"id": "a", "sample": 0, "status": "ok", "line": 1, "tokens": []}\n{"id": "b", "sa\n')
        with self.assertRaisesRegex(ValueError, re.escape(results) + " line 2: not a results "
                                                "record"):
            list(loom.read_results(results))


class UnfinishedWarns(TempDirTest):
    def test_shards_of_two_runs_warn(self):
        root = self.path("ds")
        os.makedirs(root)
        for k, lines in ((0, 6), (1, 8)):  # shard 1 read lines appended after shard 0 ran
            open(os.path.join(root, f"manifest.shard-{k}-of-2.jsonl"), "w").close()
            with open(os.path.join(root, f"dataset.shard-{k}-of-2.json"), "w") as f:
                json.dump({"format": "loom-dataset", "state": "complete",
                           "jobs_read": {"lines": lines, "hash": "fnv1a64:0"}}, f)
        with self.assertWarnsRegex(UserWarning, r"dataset\.shard-1-of-2\.json and "
                                                r"dataset\.shard-0-of-2\.json are not shards of "
                                                r"one run \(jobs_read differs"):
            loom.Dataset(root)

    def test_an_unfinished_index_warns(self):
        root = self.path("ds")
        os.makedirs(root)
        open(os.path.join(root, "manifest.jsonl"), "w").close()
        with open(os.path.join(root, "dataset.json"), "w") as f:
            json.dump({"format": "loom-dataset", "state": "partial"}, f)
        with self.assertWarnsRegex(UserWarning, r"dataset.json: partial"):
            loom.Dataset(root)
        # A failed run: its error, and what to do for one run (no merge).
        with open(os.path.join(root, "dataset.json"), "w") as f:
            json.dump({"format": "loom-dataset", "state": "failed", "error": "disk full"}, f)
        with self.assertWarnsRegex(UserWarning, r"dataset.json: failed \(disk full\)\); samples "
                                                r"may be missing: finish the run \(loom run "
                                                r"--resume\)$"):
            loom.Dataset(root)
        with open(os.path.join(root, "dataset.json"), "w") as f:
            json.dump({"format": "loom-dataset", "state": "complete"}, f)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            self.assertEqual(len(loom.Dataset(root)), 0)

