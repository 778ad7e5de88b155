"""loom from Python: build jobs from numpy arrays, run `loom run`, read its results and its
token dataset. `loom.torch.TokenIterableDataset` adapts a dataset to PyTorch."""
from .dataset import Dataset
from .jobs import Job, JobError, Model, PLACEHOLDER_ID, check_line, write_jobs
from .results import Result, read_results
from .runner import (MIN_VERSION, LoomError, LoomInterrupted, RunResult, find_loom,
                     loom_version, run, shard_path)

__version__ = "0.6.1"
__all__ = ["Dataset", "Job", "JobError", "Model", "PLACEHOLDER_ID", "check_line", "write_jobs",
           "Result", "read_results", "MIN_VERSION", "LoomError", "LoomInterrupted", "RunResult",
           "find_loom", "loom_version", "run", "shard_path"]
