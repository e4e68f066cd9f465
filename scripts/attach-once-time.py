"""How long ``vmmtui attach --once PRODUCER CONSUMER`` takes as a whole command (interpreter start,
imports, the /proc scan, kcmp, NVML where there is a GPU, the report), against two real workers.

    python scripts/attach-once-time.py [--backend memfd|cuda] [--runs 7] [--json FILE]

It drives a real vmmtui session (the same Session the inspector drives) until the consumer has
mapped the shared allocation, so both workers hold it, then launches ``python -m vmmtui attach
--once`` on their pids RUNS times, timing each launch to its exit; then finishes the session.
Issue 24's goal on the H100: < 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from vmmtui.backends import choose
from vmmtui.plan.config import SessionConfig
from vmmtui.session import Session
from vmmtui.stream.events import StepDone


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--backend", default="auto")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--json", metavar="FILE", help="also write the runs and the median to FILE")
    a = p.parse_args()
    choice = choose(a.backend)
    if not choice.usable:
        print(f"attach-once-time: {choice.reason}", file=sys.stderr)
        return 2
    session = Session(SessionConfig(backend=choice.name, size=2 << 20), choice)
    times: list[float] = []
    try:
        session.start()
        mapped = False
        while not session.stopped and not mapped:
            for e in session.step():
                if (
                    isinstance(e, StepDone)
                    and e.report.role == "consumer"
                    and e.report.step == "map"
                ):
                    mapped = True
        if not mapped:
            print(
                "attach-once-time: the session stopped before the consumer mapped", file=sys.stderr
            )
            return 1
        pids = [str(w.pid) for w in session.workers.values()]
        cmd = [sys.executable, "-m", "vmmtui", "attach", "--once", *pids]
        for n in range(1, a.runs + 1):
            t0 = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            times.append(wall)
            print(
                f"run {n}: {wall:.3f} s (exit {done.returncode}, {len(done.stdout.splitlines())} lines)"
            )
            if n == 1:
                print(done.stdout.rstrip())
    finally:
        session.close()
    median = statistics.median(times)
    print(
        f"vmmtui attach --once of 2 {choice.name} workers, {a.runs} runs on {os.uname().nodename}: "
        f"median {median:.3f} s (min {min(times):.3f}, max {max(times):.3f}; goal < 0.5 s)"
    )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "host": os.uname().nodename,
                    "backend": choice.name,
                    "runs_s": times,
                    "median_s": median,
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
