"""Reading a results JSONL file (`loom run --out`) lazily."""
import dataclasses
import json
import re
from typing import Any, Optional, Union

import numpy as np


@dataclasses.dataclass
class Result:
    """One record. ok records: `sample`, `frames` (int32 [F, P], frame models) or `tokens`
    (int32 [n], plain models; None for both with --no-tokens-in-results), `tokens_file` and
    `rows` with --tokens-out, `finish_reason` (plain), `timing`. Error records: `error`, loom's
    message including its `line N: ` prefix (`message` is without it). `record` is the
    record as read. `id` keeps its JSON type: a str, or an int when the job gave one."""
    id: Union[str, int]
    status: str
    line: int
    sample: Optional[int] = None
    error: Optional[str] = None
    frames: Optional[np.ndarray] = None
    tokens: Optional[np.ndarray] = None
    tokens_file: Optional[str] = None
    rows: Optional[tuple] = None
    finish_reason: Optional[str] = None
    timing: Optional[dict] = None
    record: Any = dataclasses.field(default=None, repr=False)

    @property
    def ok(self):
        return self.status == "ok"

    @property
    def message(self):
        return None if self.error is None else re.sub(r"^line \d+: ", "", self.error)


def _result(r):
    frames = r.get("frames")
    tokens = r.get("tokens")
    rows = r.get("rows")
    return Result(
        id=r["id"], status=r["status"], line=r["line"], sample=r.get("sample"),
        error=r.get("error"),
        frames=None if frames is None else np.asarray(frames, dtype=np.int32),
        tokens=None if tokens is None else np.asarray(tokens, dtype=np.int32),
        tokens_file=r.get("tokens_file"), rows=None if rows is None else tuple(rows),
        finish_reason=r.get("finish_reason"), timing=r.get("timing"), record=r)


def read_results(path):
    """Yields a Result per record of a results file, in file order, reading one line at a
    time. A last line without its newline (a run still writing it, or killed while writing
    it) is skipped, as `loom run --resume` drops it."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                return
            if raw.strip():
                try:
                    record = json.loads(raw)
                except ValueError as e:
                    raise ValueError(f"{path} line {n}: not a results record ({e})") from None
                yield _result(record)
