"""Is the trace inspector fast enough to live in? Three measures on one synthetic trace of real
event types (memfd_create, sendmsg with SCM_RIGHTS, recvmsg, two closes per share, and the
ledger's finding for each share, made by the ledger itself):

1. live: the inspector (headless, the real TraceApp) fed CALLS calls at RATE calls a second by a
   stand-in tracer thread that posts batches as the real one does: whether it keeps up (the lag
   between the last call posted and the screen showing it), how many repaints a second, and that
   no call was dropped from the state;
2. step back: after the whole trace is folded, the state of random frames of a 100,000-call trace
   (snapshots every EVERY events, folded forward): median and max milliseconds, and one frame
   drawn on the screen;
3. the fold alone: calls a second.

    python scripts/trace-inspector-bench.py [--calls 100000] [--rate 10000] [--json FILE]

Timings on a shared machine are noisy: run it several times; ratios are what is compared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vmmtui.pipeline.session import TraceSession  # noqa: E402
from vmmtui.stream.observed import (  # noqa: E402
    FdCloseCall,
    FdsReceived,
    FdsSent,
    MemfdCreated,
    SocketEnd,
    TraceFinished,
    TraceStarted,
)

CALLS_PER_SHARE = 5


def synthetic(calls: int) -> list:
    """A trace of ``calls`` calls: shares of a memfd between two processes, with the findings."""
    a, b, t0 = 1000, 1001, 10**12
    out: list = [TraceStarted("ebpf", [a], ["bench"], ktime0=t0)]
    sock = SocketEnd(7, 8)
    t = t0
    for i in range(calls // CALLS_PER_SHARE):
        file = f"{i:012x}"
        t += 100_000
        batch = [
            MemfdCreated(a, a, t, f"share-{i}", 4, file),
            FdsSent(a, a, t + 10, "sendmsg", sock, [4], [file], 1),
            FdCloseCall(a, a, t + 20, 4, file, 0),
            FdsReceived(b, b, t + 30, "recvmsg", SocketEnd(8, 7), [3], [file], 1),
            FdCloseCall(b, b, t + 40, 3, file, 0),
        ]
        out += batch
    out.append(TraceFinished(["bench"], 0, None, calls, 0, 1.0))
    return list(TraceSession.replay(out).events())  # with the findings, as a live run has them


class PacedTracer:
    """A stand-in for Tracer: the same events() contract, paced at ``rate`` calls a second."""

    def __init__(self, events: list, rate: float):
        self.all, self.rate = events, rate
        self.command, self.exit, self.proc, self.stopping = ["bench"], None, None, False
        #: the Source protocol's: no running pids followed, no command tree of its own
        self.pids: list[int] = []
        self.tree = None
        self.finished = threading.Event()
        self.posted_last = 0.0

    def events(self, on_batch=None):
        start = time.perf_counter()
        calls = 0
        for e in self.all:
            if self.stopping:
                break
            if hasattr(e, "tid"):
                calls += 1
                if calls % 100 == 0:  # the real tracer drains the ring buffer in batches
                    if on_batch is not None:
                        on_batch()
                    ahead = calls / self.rate - (time.perf_counter() - start)
                    if ahead > 0:
                        time.sleep(ahead)
            yield e
        if on_batch is not None:
            on_batch()
        self.posted_last = time.perf_counter()
        self.finished.set()


async def live(events: list, rate: float) -> dict:
    from vmmtui.tui.trace import TraceApp

    calls = sum(1 for e in events if hasattr(e, "tid"))
    tracer = PacedTracer([e for e in events if type(e).__name__ != "LedgerFinding"], rate)
    app = TraceApp(tracer, title="bench")
    paints: list[float] = []
    real_paint = app.paint

    def counted(state=None):
        paints.append(time.perf_counter())
        real_paint(state)

    app.paint = counted  # type: ignore[method-assign]
    shown_all = None
    async with app.run_test(size=(160, 48)) as pilot:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < calls / rate * 4 + 30:
            await pilot.pause(0.02)
            state = app.state_shown()
            if app.ended and state.programs is not None and state.programs.calls_len >= calls:
                shown_all = time.perf_counter()
                break
        elapsed = (shown_all or time.perf_counter()) - t0
        v = app.frames.latest().programs
        assert v is not None
        if app.error:  # the app said why the trace stopped: a figure without the calls is none
            raise SystemExit(f"the inspector stopped: {app.error}")
        window = [p for p in paints if t0 <= p <= t0 + calls / rate]
        rates = len(window) / (calls / rate) if window else 0.0
        app.exit(0)
    return {
        "calls": calls,
        "rate_asked": rate,
        "seconds_to_show_all": round(elapsed, 3),
        "lag_after_last_call_s": round((shown_all or 0) - tracer.posted_last, 3)
        if shown_all
        else None,
        "kept_up": shown_all is not None and shown_all - tracer.posted_last < 1.0,
        "repaints_per_s": round(rates, 1),
        "calls_in_state": v.calls_len,
        "findings_in_state": v.findings_len,
        "dropped": calls - v.calls_len,
    }


def step_back(events: list, samples: int) -> dict:
    from vmmtui.record.calls import CallTimeline
    from vmmtui.view import FrameStates, ScreenState

    # which calls matter, as the run's session said (the live inspector gets them so): the
    # timeline folds nothing of its own
    marked = list(TraceSession.replay(events).marked())
    events, calls = [e for e, _ in marked], [c for _, c in marked]
    t = time.perf_counter()
    states = FrameStates(CallTimeline(events, calls), ScreenState.for_programs())
    states.latest()
    fold_s = time.perf_counter() - t
    rng = random.Random(7)
    times = []
    for _ in range(samples):
        k = rng.randrange(0, states.last)
        t = time.perf_counter()
        states.at(k)
        times.append((time.perf_counter() - t) * 1e3)
    calls = states.timeline.frames[-1].steps
    return {
        "frames": len(states.timeline.frames),
        "calls": calls,
        "states_kept": len(states._states) + len(states._recent),
        "fold_all_s": round(fold_s, 3),
        "fold_calls_per_s": round(calls / fold_s),
        "step_back_ms_median": round(statistics.median(times), 2),
        "step_back_ms_max": round(max(times), 2),
        "step_back_samples": samples,
    }


async def drawn_step_back(events: list, samples: int) -> dict:
    """A frame of the trace drawn by the replay app: the state and the repaint, both."""
    from vmmtui.record.recording import Header, Recording
    from vmmtui.tui.replay import ReplayApp

    rec = Recording(Header(backend="trace"), events, path="bench")
    app = ReplayApp(rec)
    rng = random.Random(11)
    times = []
    async with app.run_test(size=(160, 48)) as pilot:
        app.go(app.frames.last)
        await pilot.pause()
        for _ in range(samples):
            k = rng.randrange(0, app.frames.last)
            t = time.perf_counter()
            app.go(k)
            await pilot.pause()
            times.append((time.perf_counter() - t) * 1e3)
        app.exit(0)
    return {
        "drawn_ms_median": round(statistics.median(times), 1),
        "drawn_ms_max": round(max(times), 1),
    }


def reference_ops_per_s() -> float:
    """This machine's speed now, in a plain Python loop (dict copies and small objects, the fold's
    kind of work): a timing is read against it, measured in the same run."""
    t = time.perf_counter()
    d = {i: i for i in range(20)}
    for i in range(200_000):
        d = {**d, i % 20: i}
    return 200_000 / (time.perf_counter() - t)


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--live-calls", type=int, default=50_000)
    p.add_argument("--rate", type=float, default=10_000)
    p.add_argument("--samples", type=int, default=50)
    p.add_argument("--machine", default="a 2-core x86-64 VM shared with other jobs")
    p.add_argument("--json", metavar="FILE")
    a = p.parse_args()
    ref = reference_ops_per_s()
    events = synthetic(a.calls)
    print(f"{a.calls} calls, {len(events)} events; reference {ref:.0f} ops/s", flush=True)
    back = step_back(events, a.samples)
    print("step back:", back, flush=True)
    drawn = asyncio.run(drawn_step_back(events, min(a.samples, 20)))
    print("drawn:", drawn, flush=True)
    live_result = asyncio.run(live(synthetic(a.live_calls), a.rate))
    print("live:", live_result, flush=True)
    result = {
        "what": "trace inspector: live rate, step back, fold",
        "machine": a.machine,
        "host": os.uname().nodename,
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d"),
        "python": sys.version.split()[0],
        "reference_dict_copies_per_s": round(ref),
        "reference_dict_copies_per_s_after": round(reference_ops_per_s()),
        "load_after": os.getloadavg()[0],
        "step_back": {**back, **drawn},
        "live": live_result,
    }
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
