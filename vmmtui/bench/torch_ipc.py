"""torch.multiprocessing CUDA IPC, warm, for ``vmmtui bench`` (run as a subprocess: torch is not a
vmmtui dependency and is never imported by vmmtui itself).

    python -m vmmtui.bench.torch_ipc DEVICE REPEAT SIZE...

A spawned child stays up; for each run the parent allocates a tensor, fills it on the GPU
(``fill_``), puts it on a queue (torch sends the legacy cudaIpcMemHandle), the child checks it on
the GPU (``(t == v).all()``) and answers; the time is the parent's, from the allocation to the
answer. The first run at each size warms the caching allocator and the IPC handle cache and is
not counted. One JSON line a size: {"size", "ms": [...], "verified"}; {"skip": why} without torch.
"""

from __future__ import annotations

import json
import sys
import time


def child(tensors, answers, device: int) -> None:
    import torch

    torch.cuda.set_device(device)
    while True:
        item = tensors.get()
        if item is None:
            return
        t, value = item
        ok = bool((t == value).all().item())
        del t, item
        answers.put(ok)


def main(device: int, repeat: int, sizes: list[int]) -> int:
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print(json.dumps({"skip": "torch is not installed for this Python"}), flush=True)
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"skip": "torch sees no CUDA device"}), flush=True)
        return 0
    torch.cuda.set_device(device)
    ctx = mp.get_context("spawn")
    tensors, answers = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=child, args=(tensors, answers, device), daemon=True)
    proc.start()
    try:
        for size in sizes:
            n = size // 4
            times, verified = [], 0
            for run in range(repeat + 1):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                t = torch.empty(n, dtype=torch.int32, device=f"cuda:{device}")
                t.fill_(run + 1)
                torch.cuda.synchronize()
                tensors.put((t, run + 1))
                ok = answers.get(timeout=120)
                ms = (time.perf_counter() - t0) * 1e3
                del t
                if run:  # the first is the warm-up
                    times.append(ms)
                    verified += ok
            print(json.dumps({"size": size, "ms": times, "verified": verified}), flush=True)
    finally:
        tensors.put(None)
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), [int(s) for s in sys.argv[3:]]))
