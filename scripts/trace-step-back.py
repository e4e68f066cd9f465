"""Step back in a long live trace: CALLS calls (a memfd shared between two processes, five calls a
share, with the ledger's findings) folded as the live inspector folds them, batch by batch,
forgetting frames as it does past ``MAX_EVENTS``; then the state of random frames it kept
(``FrameStates.at``), and the RSS of this process at the end.

    python3 scripts/trace-step-back.py --calls 1000000 [--samples 200] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from bisect import bisect_right
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vmmtui.pipeline.session import TraceSession  # noqa: E402
from vmmtui.record.calls import CallTimeline  # noqa: E402
from vmmtui.stream.observed import (  # noqa: E402
    FdCloseCall,
    FdsReceived,
    FdsSent,
    MemfdCreated,
    SocketEnd,
    TraceStarted,
)
from vmmtui.tui.trace import KEEP_EVENTS, MAX_EVENTS  # noqa: E402
from vmmtui.view import FrameStates, ScreenState  # noqa: E402


class Load:
    """The shares as a trace source (what the tracer would give), made as they are read."""

    stopping, pids = False, []

    def __init__(self, shares: int) -> None:
        self.shares = shares

    def events(self, on_batch=None):
        a, b, t = 1000, 1001, 10**12
        yield TraceStarted("ebpf", [a], ["load"], ktime0=t)
        sock, back = SocketEnd(7, 8), SocketEnd(8, 7)
        for i in range(self.shares):
            file, t = f"{i:012x}", t + 1000
            yield MemfdCreated(a, a, t, f"share-{i}", 4, file)
            yield FdsSent(a, a, t + 10, "sendmsg", sock, [4], [file], 1)
            yield FdCloseCall(a, a, t + 20, 4, file, 0)
            yield FdsReceived(b, b, t + 30, "recvmsg", back, [3], [file], 1)
            yield FdCloseCall(b, b, t + 40, 3, file, 0)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmRSS:"))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=1_000_000)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--json")
    a = p.parse_args()
    states = FrameStates(CallTimeline(), ScreenState.for_programs())
    batch: list = []
    marks: list[bool] = []
    t0 = time.perf_counter()
    for e, call in TraceSession(Load(a.calls // 5), live=False).marked():
        batch.append(e)
        marks.append(call)  # the session's world says which calls matter, as live
        if len(batch) == 4096:  # the app's batches; its repaint folds them, then forgets
            states.extend(batch, marks)
            batch, marks = [], []
            states.latest()
            if len(states.timeline.events) > MAX_EVENTS:
                cut = len(states.timeline.events) - KEEP_EVENTS
                ends = [f.end for f in states.timeline.frames]

                states.forget(bisect_right(ends, cut) - 1)
    states.extend(batch, marks)
    states.latest()
    fold_s = time.perf_counter() - t0
    rng = random.Random(7)
    times = []
    for _ in range(a.samples):
        k = rng.randrange(0, states.last)
        t = time.perf_counter()
        states.at(k)
        times.append((time.perf_counter() - t) * 1e3)
    result = {
        "calls": states.frames[-1].steps,
        "frames_kept": len(states.frames),
        "calls_forgotten": states.timeline.dropped,
        "fold_s": round(fold_s, 1),
        "step_back_ms_median": round(statistics.median(times), 2),
        "step_back_ms_p99": round(sorted(times)[int(len(times) * 0.99) - 1], 2),
        "step_back_ms_max": round(max(times), 2),
        "samples": a.samples,
        "rss_mb_end": round(rss_mb(), 1),
    }
    print(json.dumps(result))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
