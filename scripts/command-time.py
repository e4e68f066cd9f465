"""How long a vmmtui command that prints and exits takes, as a whole (``attach --once PID``):
wall time and the CPU the process used, medians of many runs.

    python scripts/command-time.py [--runs 15] [--before-tree DIR] [--json FILE] -- attach --once PID

Each round launches ``python -m vmmtui ARGS`` (stdin and stdout to /dev/null) and, with
``--before-tree DIR`` (an earlier revision, ``git archive REV | tar -x -C DIR``), the same from
DIR, alternating, so that both see the same machine; and ``python -c pass``, the interpreter's own
start, as the floor. The CPU is the child's user + system time (``wait4``): on a machine shared
with other work the wall time moves with the load, the CPU much less. Bytecode is compiled first
in each tree, as pip does on install.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def one(argv: list[str], cwd: str | None = None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and exit status of ``python ARGV``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else b""
    if proc.returncode:
        sys.stderr.write(err.decode(errors="replace")[-400:])
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--before-tree", metavar="DIR", help="an earlier revision's tree, measured too")
    p.add_argument("--json", metavar="FILE", help="also write the runs and medians to FILE")
    p.add_argument("vmmtui_args", nargs=argparse.REMAINDER, help="after --: the command")
    a = p.parse_args()
    argv = a.vmmtui_args[1:] if a.vmmtui_args[:1] == ["--"] else a.vmmtui_args
    for tree in filter(None, (".", a.before_tree)):
        compileall.compile_dir(str(Path(tree) / "vmmtui"), quiet=1)
    runs: dict[str, list[tuple[float, float, int]]] = {"python": [], "after": []}
    if a.before_tree:
        runs["before"] = []
    for n in range(1, a.runs + 1):
        runs["python"].append(one(["-c", "pass"]))
        if a.before_tree:
            runs["before"].append(one(["-m", "vmmtui", *argv], cwd=a.before_tree))
        runs["after"].append(one(["-m", "vmmtui", *argv]))
        print(
            f"run {n}: "
            + "; ".join(f"{k} {v[-1][0]:.3f} s ({v[-1][1]:.3f} s CPU)" for k, v in runs.items()),
            flush=True,
        )
    failed = {k: [r[2] for r in v if r[2]] for k, v in runs.items()}
    if any(failed.values()):
        print(f"command-time: exit statuses other than 0: {failed}", file=sys.stderr)
        return 1
    medians = {
        k: {
            "wall_median_s": statistics.median(r[0] for r in v),
            "wall_max_s": max(r[0] for r in v),
            "cpu_median_s": statistics.median(r[1] for r in v),
        }
        for k, v in runs.items()
    }
    for k, m in medians.items():
        print(
            f"{k}: wall median {m['wall_median_s']:.3f} s (max {m['wall_max_s']:.3f}), "
            f"CPU median {m['cpu_median_s']:.3f} s"
        )
    print(
        f"vmmtui {' '.join(argv)}, {a.runs} runs on {os.uname().nodename}, load {os.getloadavg()}"
    )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "host": os.uname().nodename,
                    "argv": argv,
                    "before_tree": a.before_tree,
                    "medians": medians,
                    "runs": {
                        k: [{"wall_s": w, "cpu_s": c} for w, c, _ in v] for k, v in runs.items()
                    },
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
