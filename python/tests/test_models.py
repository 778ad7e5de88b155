"""loom.Model reads every checkpoint layout loom runs as loom reads it (`loom inspect --json`),
and job lines are read as loom reads them (a byte order mark at the start of a file)."""
import json
import os
import subprocess
from unittest import mock

import loom
from support import TESTDATA, TINY_LLAMA, TempDirTest, cli_errors, loom_bin

TINY_GPT2 = os.path.join(TESTDATA, "tiny_gpt2")
TINY_META = os.path.join(TESTDATA, "tiny_llama_meta")  # params.json, no config.json


def inspect_spec(path):
    p = subprocess.run([loom_bin(), "inspect", "-m", path, "--json"], capture_output=True,
                       text=True, check=True)
    return json.loads(p.stdout)["spec"]


def layout(model):
    return {"vocab": model.vocab_size, "max_positions": model.max_positions,
            "image_tokens": model.image_tokens, "action_tokens": model.action_tokens,
            "action_dim": model.action_dim, "temporal_rows": model.temporal_rows}


class ModelAsLoomReadsIt(TempDirTest):
    def test_every_test_checkpoint(self):
        names = sorted(n for n in os.listdir(TESTDATA)
                       if any(os.path.exists(os.path.join(TESTDATA, n, f))
                              for f in ("config.json", "params.json")))
        self.assertTrue({"tiny_gpt2", "tiny_opt", "tiny_llama_meta", "tiny_v1"} <= set(names))
        for name in names:
            with self.subTest(model=name):
                path = os.path.join(TESTDATA, name)
                spec, got = inspect_spec(path), layout(loom.Model(path))
                self.assertEqual(got, {k: spec[k] for k in got})
                self.assertGreater(spec["max_positions"], 0)

    def test_gpt2_lengths_are_checked(self):
        """GPT-2 names its length n_positions: a job loom refuses for its length is refused in
        Python with loom's message."""
        gpt2 = loom.Model(TINY_GPT2)
        self.assertEqual(gpt2.max_positions, 64)
        self.assertEqual(loom.Model.from_config({"vocab_size": 9, "n_ctx": 32}).max_positions, 32)
        lines = ['{"id":1,"prompt_token_ids":[%s],"max_tokens":4}' % ",".join(["1"] * 70),
                 '{"id":2,"prompt_token_ids":[1,2,3],"max_tokens":100}',
                 '{"id":3,"prompt_token_ids":[1,2,3],"max_tokens":61}']
        cli = cli_errors(TINY_GPT2, lines, self.tmp)
        self.assertEqual(sorted(cli), [1, 2])
        for n, line in enumerate(lines, 1):
            with self.subTest(line=n):
                if n in cli:
                    with self.assertRaises(loom.JobError) as caught:
                        loom.check_line(line, gpt2)
                    self.assertEqual(caught.exception.message, cli[n])
                else:
                    loom.check_line(line, gpt2)
        with self.assertRaisesRegex(loom.JobError, "expected at most 61"):
            loom.Job.plain([1, 2, 3], 62, model=gpt2)

    def test_meta_layout_without_config_json(self):
        meta = loom.Model(TINY_META)
        self.assertEqual((meta.vocab_size, meta.max_positions, meta.frames), (1000, 64, False))
        self.assertEqual(meta.architecture, "MetaLlamaForCausalLM")
        with self.assertRaisesRegex(loom.JobError, "expected at most 63 ids"):
            loom.Job.plain(list(range(64)), 1, model=meta)
        # Without a loom binary the layout cannot be read: said, not a FileNotFoundError.
        with mock.patch.dict(os.environ, {"PATH": os.path.join(self.tmp, "empty")}):
            os.environ.pop("LOOM_BIN", None)
            with self.assertRaisesRegex(loom.LoomError,
                                        "params.json and no config.json.*set LOOM_BIN"):
                loom.Model(TINY_META)


class ByteOrderMark(TempDirTest):
    def test_a_first_line_with_a_bom_is_read_as_loom_reads_it(self):
        llama = loom.Model(TINY_LLAMA)
        line = '\ufeff{"id":1,"prompt_token_ids":[1,2],"max_tokens":2}'
        self.assertEqual(cli_errors(TINY_LLAMA, [line], self.tmp), {})  # loom runs it
        loom.check_line(line, llama)
        job = loom.Job.from_line(line + "\n", model=llama)
        self.assertEqual(job.line, line[1:])  # written anywhere in a file, it stays valid
        self.assertEqual(job.id, 1)
        with self.assertRaisesRegex(loom.JobError, 'expected "max_tokens"'):
            loom.check_line('\ufeff{"id":1,"prompt_token_ids":[1,2],"num_frames":2}', llama)
