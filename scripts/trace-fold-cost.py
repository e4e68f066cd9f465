"""What a live trace inspector folds per event, in CPU microseconds (``time.process_time``, the
least of N rounds, so that other work on a shared machine counts little): the run's session (its
ledger and refcount book, each event with its mark), the call timeline (its frames, cut where the
marks say), the programs panel. The recording is copied COPIES times, its pids and clocks moved.
One JSON line; to compare two trees of the code, run it once under each (``PYTHONPATH=TREE``),
one after the other, several times (a tree whose session has no marks is measured without).

    python scripts/trace-fold-cost.py [RECORDING] [--copies 10] [--rounds 7]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from vmmtui.pipeline.session import TraceSession
from vmmtui.record.calls import CallTimeline
from vmmtui.record.recording import read
from vmmtui.view.programs import ProgramsView, fold_program_event

ROOT = Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument("recording", nargs="?", default=ROOT / "tests/data/traces/shares_1000.jsonl.gz")
ap.add_argument("--copies", type=int, default=10)
ap.add_argument("--rounds", type=int, default=7)
args = ap.parse_args()
COPIES, N = args.copies, args.rounds
raw = read(args.recording).events


def moved(e, k):
    ch = {}
    for f in ("pid", "tid", "child"):
        if hasattr(e, f) and isinstance(getattr(e, f), int) and getattr(e, f) > 0:
            ch[f] = getattr(e, f) + k * 100000
    if hasattr(e, "ktime") and isinstance(e.ktime, int) and e.ktime:
        ch["ktime"] = e.ktime + k * 10**10
    return dataclasses.replace(e, **ch) if ch else e


events = [moved(e, k) for k in range(COPIES) for e in raw]
marks = hasattr(TraceSession, "marked")


def best(fn):
    out = []
    for _ in range(N):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return min(out) * 1e6 / len(events)


box = {}


def session():
    # as the live inspector's tracer thread does: each event into the batch, with its mark
    stream, calls = [], []
    if marks:
        for e, c in TraceSession.replay(events).marked():
            stream.append(e)
            calls.append(c)
    else:
        for e in TraceSession.replay(events).events():
            stream.append(e)
    box["stream"], box["calls"] = stream, calls


def timeline():
    CallTimeline(box["stream"], box["calls"]) if marks else CallTimeline(box["stream"])


def panel():
    v = ProgramsView()
    for e in box["stream"]:
        v = fold_program_event(v, e)


r = {"marks": marks, "events": len(events)}
for k, fn in (("session", session), ("timeline", timeline), ("panel", panel)):
    r[k] = round(best(fn), 3)
r["total"] = round(r["session"] + r["timeline"] + r["panel"], 3)
print(json.dumps(r))
