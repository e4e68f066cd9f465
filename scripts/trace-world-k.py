"""The keyframe interval of the world (``model.world.EVERY``): what one clone of a trace's world
costs, in events folded. A recording (copied COPIES times, its pids and clocks moved) is folded
into one world; the CPU time per event folded and the CPU time of a clone at the quarter, the
half and the end are measured (``time.process_time``, the least of ROUNDS, so that other work on
a shared machine counts little). K = clone / event: a keyframe every K events makes a step back
cost at most a clone and K events' fold, about two clones. One JSON line.

    python scripts/trace-world-k.py [RECORDING] [--copies 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vmmtui.model.world import World  # noqa: E402
from vmmtui.pipeline.replay import read  # noqa: E402
from vmmtui.pipeline.session import MADE_BY_THE_LEDGER  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument("recording", nargs="?", default=ROOT / "tests/data/traces/shares_1000.jsonl.gz")
ap.add_argument("--copies", type=int, default=10)
ap.add_argument("--rounds", type=int, default=5)
args = ap.parse_args()
raw = [e for e in read(args.recording, found_again=False).events
       if not isinstance(e, MADE_BY_THE_LEDGER)]  # fmt: skip


def moved(e, k):
    ch = {}
    for f in ("pid", "tid", "child"):
        if hasattr(e, f) and isinstance(getattr(e, f), int) and getattr(e, f) > 0:
            ch[f] = getattr(e, f) + k * 100000
    if hasattr(e, "ktime") and isinstance(e.ktime, int) and e.ktime:
        ch["ktime"] = e.ktime + k * 10**10
    return dataclasses.replace(e, **ch) if ch else e


events = [moved(e, k) for k in range(args.copies) for e in raw]


def least(fn) -> float:
    best = float("inf")
    for _ in range(args.rounds):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def fold_all() -> None:
    w = World()
    for e in events:
        w.fold(e)


per_event = least(fold_all) / len(events)
clones = {}
for part in (4, 2, 1):
    w = World()
    for e in events[: len(events) // part]:
        w.fold(e)
    clones[f"1/{part}"] = least(w.clone)
worst = max(clones.values())
print(json.dumps({
    "events": len(events),
    "fold_us_per_event": round(per_event * 1e6, 2),
    "clone_ms": {k: round(v * 1e3, 2) for k, v in clones.items()},
    "k_events_per_clone": round(worst / per_event),
}))  # fmt: skip
