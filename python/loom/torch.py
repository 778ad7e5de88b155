"""A PyTorch IterableDataset over a loom token dataset (needs torch; `import loom.torch`)."""
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .dataset import Dataset


class TokenIterableDataset(IterableDataset):
    """Yields (frames, actions, meta) per sample, in manifest order within each reader, as
    torch tensors (actions None where the dataset has none). DataLoader workers, and ranks
    when `rank`/`world_size` are given, each take every n-th sample, so every sample is read
    exactly once per epoch. Samples differ in length: use batch_size=None or a collate_fn.
    `shard="K/N"` reads only that shard's samples (loom.Dataset)."""

    def __init__(self, root, rank=0, world_size=1, shard=None):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} of world_size {world_size}: expected 0 <= rank < size")
        self.root, self.rank, self.world_size, self.shard = root, rank, world_size, shard

    def __iter__(self):
        worker = get_worker_info()
        workers, wid = (worker.num_workers, worker.id) if worker else (1, 0)
        count, index = self.world_size * workers, self.rank * workers + wid
        ds = Dataset(self.root, shard=self.shard)  # per worker: its own open files
        for i, entry in enumerate(ds.entries()):
            if i % count == index:
                frames, actions, meta = ds.read(entry)
                yield (torch.from_numpy(frames),
                       None if actions is None else torch.from_numpy(actions), meta)
