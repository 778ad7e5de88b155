"""loom.Dataset when the folder changes under it (a run with --overwrite, a merge, a shard
run again) and when shards are missing: it reads the samples the manifest names now, or says
that its index is stale, never another run's frames under this run's lines."""
import json
import os
import pickle
import shutil
import subprocess
import warnings

import numpy as np

import loom
from support import TINY_LLAMA, TINY_V1, TempDirTest, loom_bin, read

V1 = loom.Model(TINY_V1)


def jobs(seed, n=4):
    """n jobs with the same ids whatever the seed: a run with another seed writes other frames
    under the same ids and the same data file names."""
    rng = np.random.default_rng(seed)
    return [loom.Job(rng.integers(0, 999, (1, 10)), rng.uniform(-1, 1, (9, 3)), 2, id=i,
                     sampling={"seed": seed}, model=V1) for i in range(n)]


def frames_by_key(result):
    return {(r.id, r.sample): r.frames for r in result.results()}


class RewrittenFolder(TempDirTest):
    def run_v1(self, seed, **options):
        return loom.run(V1, jobs(seed), self.path("r.jsonl"), tokens_out=self.path("ds"),
                        progress=False, **options)

    def assert_samples(self, samples, truth):
        seen = {}
        for frames, _, meta in samples:
            seen[(meta["id"], meta["sample"])] = frames
        self.assertEqual(sorted(seen), sorted(truth))
        for key, frames in seen.items():
            np.testing.assert_array_equal(frames, truth[key], err_msg=str(key))

    def test_overwrite_is_read_as_the_new_run(self):
        first = frames_by_key(self.run_v1(0))
        ds = loom.Dataset(self.path("ds"))
        self.assert_samples(ds, first)  # every data file opened, and held
        self.assertEqual(len(ds), 4)
        second = frames_by_key(self.run_v1(1, overwrite=True))
        self.assertFalse(np.array_equal(first[(0, 0)], second[(0, 0)]))
        # Iteration: the new manifest, and the new data files under the old names.
        self.assert_samples(ds, second)
        self.assert_samples((ds.read(e) for e in ds.entries()), second)
        # The index was of the old manifest: said, not read.
        with self.assertRaisesRegex(RuntimeError, r"manifest\.jsonl was replaced since this "
                                                  r"Dataset indexed it.*make a new loom\.Dataset"):
            ds[0]
        fresh = loom.Dataset(self.path("ds"))
        self.assert_samples((fresh[i] for i in range(len(fresh))), second)

    def test_an_iteration_across_an_overwrite_stops_rather_than_mix_runs(self):
        self.run_v1(0)
        samples = iter(loom.Dataset(self.path("ds")))
        next(samples)  # the old manifest's lines are buffered from here on
        self.run_v1(1, overwrite=True)
        # Its next line names a file that now holds the new run's samples: not read.
        with self.assertRaisesRegex(RuntimeError, r"manifest\.jsonl was replaced during the "
                                                  r"iteration.*iterate a new loom\.Dataset"):
            next(samples)

    def test_appends_are_fine_a_shorter_manifest_is_not(self):
        self.run_v1(0)
        folder = self.path("copy")
        shutil.copytree(self.path("ds"), folder)
        manifest = os.path.join(folder, "manifest.jsonl")
        lines = read(manifest).splitlines(keepends=True)
        ds = loom.Dataset(folder)
        self.assertEqual(len(ds), 4)
        with open(manifest, "a") as f:  # a run still writing appends
            f.write(lines[0])
        self.assertEqual(ds[3][2], json.loads(lines[3]))
        self.assertEqual(len(ds), 4)  # the index as taken
        self.assertEqual(len(loom.Dataset(folder)), 5)
        with open(manifest, "r+") as f:  # the same file, cut in place: rewritten, maybe
            f.truncate(len("".join(lines[:2])))
        for i in (1, 3):
            with self.assertRaisesRegex(RuntimeError, "is shorter than it was since this "
                                                      "Dataset indexed it"):
                ds[i]

    def test_a_pickled_dataset_checks_the_manifest_it_indexed(self):
        self.run_v1(0)
        ds = loom.Dataset(self.path("ds"))
        ds.context(1)  # index built, files open: they stay behind
        copy = pickle.loads(pickle.dumps(ds))
        np.testing.assert_array_equal(copy[2][0], ds[2][0])
        stale = pickle.loads(pickle.dumps(ds))
        self.run_v1(1, overwrite=True)
        with self.assertRaisesRegex(RuntimeError, "was replaced since"):
            stale[0]

    def test_context_takes_any_integer(self):
        self.run_v1(0)
        ds = loom.Dataset(self.path("ds"))
        for i in (np.int64(1), np.int32(-1), 3):
            for want, got in zip(ds.context(int(i)), ds.context(i)):
                np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(ds[np.int64(2)][0], ds[2][0])
        with self.assertRaises(TypeError):
            ds.context(1.0)


class Shards(TempDirTest):
    def run_shard(self, shard, seed=0, n=6, **options):
        return loom.run(V1, jobs(seed, n), self.path("r.jsonl"), tokens_out=self.path("ds"),
                        shard=shard, jobs_path=self.path("jobs.jsonl"), progress=False, **options)

    def test_a_missing_shard_warns_and_a_run_reads_its_own_shard(self):
        r0, r2 = self.run_shard("0/3"), self.run_shard("2/3")
        with self.assertWarnsRegex(UserWarning, r"dataset\.shard-1-of-3\.json: missing \(shard "
                                                r"1/3 never ran here\)"):
            whole = loom.Dataset(self.path("ds"))
        self.assertEqual(len(whole), 4)
        for result in (r0, r2):
            self.assertEqual(result.shard, result.out[-len("0-of-3.jsonl"):][0] + "/3")
            ds = result.dataset()
            truth = frames_by_key(result)
            self.assertEqual(len(ds), len(truth))
            self.assertEqual(sorted((m["id"], m["sample"]) for _, _, m in ds), sorted(truth))
        with self.assertRaisesRegex(FileNotFoundError, "shard 1/3 has written nothing here"):
            loom.Dataset(self.path("ds"), shard="1/3")
        with self.assertRaisesRegex(ValueError, "expected \"K/N\""):
            loom.Dataset(self.path("ds"), shard="3/3")

        self.run_shard("1/3")  # now whole: no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            self.assertEqual(len(loom.Dataset(self.path("ds"))), 6)

    def test_a_shard_with_no_samples_is_not_missing(self):
        self.run_shard("0/3", n=2)
        self.run_shard("1/3", n=2)
        empty = self.run_shard("2/3", n=2)  # no job is its: an index and no manifest
        self.assertEqual(len(empty.dataset()), 0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            self.assertEqual(len(loom.Dataset(self.path("ds"))), 2)

    def test_iteration_follows_the_folder_after_a_merge_is_undone(self):
        truth = {}
        for k in (0, 1):
            truth.update(frames_by_key(self.run_shard(f"{k}/2")))
        subprocess.run([loom_bin(), "merge", "--dataset", self.path("ds")], check=True,
                       capture_output=True)
        merged = loom.Dataset(self.path("ds"))
        self.assertEqual(os.path.basename(merged.manifests[0]), "manifest.jsonl")
        self.assertEqual(len(merged), 6)
        # The shard's own samples, also from a merged folder.
        shard1 = loom.Dataset(self.path("ds"), shard="1/2")
        self.assertEqual(sorted(m["id"] for _, _, m in shard1), [1, 3, 5])
        # Shard 1 again with other jobs: loom removes the merged manifest.jsonl.
        again = frames_by_key(self.run_shard("1/2", seed=1, overwrite=True))
        self.assertFalse(os.path.exists(self.path("ds", "manifest.jsonl")))
        truth.update(again)
        self.assert_equal_samples(merged, truth)
        with self.assertRaisesRegex(RuntimeError, r"manifest\.jsonl was removed since"):
            merged[0]

    def assert_equal_samples(self, ds, truth):
        seen = 0
        for frames, _, meta in ds:
            np.testing.assert_array_equal(frames, truth[(meta["id"], meta["sample"])])
            seen += 1
        self.assertEqual(seen, len(truth))


class PlainShardDataset(TempDirTest):
    def test_run_result_dataset_of_an_unsharded_plain_run(self):
        jobs_ = [{"id": i, "prompt_token_ids": [1, 2, 3], "max_tokens": 3} for i in range(3)]
        result = loom.run(TINY_LLAMA, jobs_, self.path("r.jsonl"), tokens_out=self.path("ds"),
                          shard="0/1", progress=False)
        self.assertEqual(result.shard, "0/1")
        self.assertEqual(result.out, self.path("r.jsonl"))
        self.assertEqual(len(result.dataset()), 3)
