"""A healthy torch DataLoader, the way a training loop uses one: workers make CPU tensors that
reach the main process in shared memory (torch.multiprocessing's reductions: an fd sent over a
Unix socket with the ``file_descriptor`` strategy, a /dev/shm name with ``file_system``), the
loop reads each batch and lets it go; an epoch ends, the workers exit, a new epoch starts them
again. Nothing is kept: vmmtui's verdict on it must be 0 to look at (scripts/peers-check.sh).

  python peers-dataloader.py [STRATEGY [EPOCHS [WORKERS]]]   (file_descriptor, 3, 2)
"""

import sys

import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    """64 samples of 16 KiB each: big enough that every batch goes through shared memory."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((64, 64), float(i))


def main() -> None:
    strategy = sys.argv[1] if len(sys.argv) > 1 else "file_descriptor"
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    mp.set_sharing_strategy(strategy)
    loader = DataLoader(Squares(), batch_size=8, num_workers=workers)
    total = 0.0
    for _ in range(epochs):
        for batch in loader:
            total += float(batch.sum())
    expected = epochs * sum(float(i) * 64 * 64 for i in range(64))
    print(
        f"{strategy}: {epochs} epochs, {workers} workers, sum {total:.0f} (expected {expected:.0f})"
    )
    sys.exit(0 if total == expected else 1)


if __name__ == "__main__":
    main()
