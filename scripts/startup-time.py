"""How long the inspector takes to show its first frame, and both workers' pids, after launch, against
a bare Textual app's first frame measured in the same run.

    python scripts/startup-time.py [--runs 5] [--size 160x48] [--json FILE] [--before-tree DIR]
                                   [-- vmmtui options]

Runs alternate: the bare app (``BARE``: one screen, a header and one panel titled "producer", the
floor any Textual app pays: Python, Textual's imports, its first layout), then the inspector, and
again, so that both see the same machine; the last line gives the inspector's first frame as a
multiple of the bare app's (the goal: within 1.2x).

Starts ``python -m vmmtui`` in a pseudo-terminal of the given size, reads everything it writes, and
notes the time (from just before the launch) when the screen first shows a panel title (the
first frame) and when it shows the pid of every worker the app launched (read from /proc: the
app's children running ``vmmtui.worker``). Escape sequences are stripped before searching, so a pid
counts once its digits were written to the terminal. Then it sends ``q`` and waits for the exit.
Prints one line per run and the medians.

``--before-tree DIR`` (an earlier revision, ``git archive REV | tar -x -C DIR``) also launches
that revision's ``python -m vmmtui`` from DIR in every round, for a before/after in one run.
vmmtui's bytecode is compiled first in each tree, as pip does on install (the bare app's Textual
is compiled too): with PYTHONDONTWRITEBYTECODE set, every launch would compile the package's
sources anew (about 0.1 s on a 2-core VM) and measure that instead.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import fcntl
import json
import os
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ESCAPES = re.compile(
    rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|.)"
)
FIRST_FRAME = b"producer"
DEADLINE_S = 30.0
#: the floor: a Textual app with one screen, a header and a panel (the panel's title is FIRST_FRAME)
BARE = """
from textual.app import App
from textual.widgets import Header, Static


class Bare(App):
    BINDINGS = [("q", "quit", "Quit")]
    CSS = "Static { border: round $accent; height: 1fr; }"

    def compose(self):
        yield Header()
        panel = Static("a bare Textual app: one screen, a header and a panel")
        panel.border_title = "producer"
        yield panel


Bare().run()
"""


def workers_of(pid: int) -> list[int]:
    """The pids of ``pid``'s children that run a vmmtui worker."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                cmd = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"vmmtui.worker" in cmd:
                found.append(int(child))
    return sorted(set(found))


def one_run(
    argv: list[str],
    cols: int,
    rows: int,
    expect_workers: int,
    alongside: list[str] | None = None,
    marker: bytes = FIRST_FRAME,
    cwd: str | None = None,
) -> dict:
    """One launch of ``python ARGV`` in a pseudo-terminal: when the first frame, then the pids, showed.

    ``alongside``: ``python ALONGSIDE`` started at the same instant (its output dropped, reaped after),
    to see what a process running beside the app (the capability probe) costs its first frame."""
    start = time.perf_counter()
    beside = None
    if alongside:
        beside = subprocess.Popen(
            [sys.executable, *alongside],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    pid, fd = os.forkpty()
    if pid == 0:  # the child: the inspector or the bare app
        os.environ["TERM"] = os.environ.get("TERM", "xterm-256color")
        if cwd:
            os.chdir(cwd)
        os.execvp(sys.executable, [sys.executable, *argv])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    screen = b""
    first = pids_at = None
    pids: list[int] = []
    try:
        while time.perf_counter() - start < DEADLINE_S and pids_at is None:
            ready, _, _ = select.select([fd], [], [], 0.005)
            if ready:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                screen += ESCAPES.sub(b"", chunk)
            now = time.perf_counter() - start
            if first is None and marker in screen:
                first = now
            if first is not None:
                if len(pids) < expect_workers:
                    pids = workers_of(pid)
                if len(pids) >= expect_workers and all(str(p).encode() in screen for p in pids):
                    pids_at = now
    finally:
        os.write(fd, b"q")
        end = time.monotonic() + 15
        while time.monotonic() < end:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if select.select([fd], [], [], 0.05)[0]:
                with contextlib.suppress(OSError):
                    os.read(fd, 1 << 16)
        else:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        os.close(fd)
        if beside is not None:
            try:
                beside.wait(30)
            except subprocess.TimeoutExpired:
                beside.kill()
                beside.wait()
    return {"first_frame_s": first, "pids_s": pids_at, "pids": pids}


def fmt(v: float | None) -> str:
    return "never" if v is None else f"{v:.3f} s"


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--size", default="160x48", help="terminal COLSxROWS (default 160x48)")
    p.add_argument("--workers", type=int, default=2, help="worker pids to wait for (default 2)")
    p.add_argument("--json", metavar="FILE", help="also write the runs and medians to FILE")
    p.add_argument(
        "--first-frame",
        default=FIRST_FRAME.decode(),
        metavar="TEXT",
        help="what vmmtui's first frame shows (default: the producer panel's title); e.g. "
        "'wire: transfers' for `trace -- true` with --workers 0",
    )
    p.add_argument(
        "--bare-with-probe",
        action="store_true",
        help="also launch the bare app with the capability probe (python -m vmmtui.backends.probe) "
        "started beside it, each round: does the probe slow a first frame by running beside it?",
    )
    p.add_argument(
        "--before-tree",
        metavar="DIR",
        help="also launch the vmmtui in DIR (an earlier revision) each round, for a comparison",
    )
    p.add_argument("vmmtui_args", nargs=argparse.REMAINDER, help="after --: options for vmmtui")
    a = p.parse_args()
    cols, rows = (int(v) for v in a.size.split("x"))
    argv = a.vmmtui_args[1:] if a.vmmtui_args[:1] == ["--"] else a.vmmtui_args
    firsts, pidss, bares, probed, runs, befores = [], [], [], [], [], []
    for tree in filter(None, (".", a.before_tree)):  # as an install would have it
        compileall.compile_dir(str(Path(tree) / "vmmtui"), quiet=1)
    for n in range(1, a.runs + 1):
        bare = one_run(["-c", BARE], cols, rows, 0)
        beside = None
        if a.bare_with_probe:
            beside = one_run(["-c", BARE], cols, rows, 0, ["-m", "vmmtui.backends.probe"])
            if beside["first_frame_s"] is not None:
                probed.append(beside["first_frame_s"])
        before = None
        if a.before_tree:
            before = one_run(
                ["-m", "vmmtui", *argv],
                cols,
                rows,
                a.workers,
                marker=a.first_frame.encode(),
                cwd=a.before_tree,
            )
            if before["first_frame_s"] is not None:
                befores.append(before["first_frame_s"])
        r = one_run(["-m", "vmmtui", *argv], cols, rows, a.workers, marker=a.first_frame.encode())
        print(
            f"run {n}: bare Textual first frame {fmt(bare['first_frame_s'])}; "
            + (f"before {fmt(before['first_frame_s'])}; " if before else "")
            + (f"bare with the probe beside it {fmt(beside['first_frame_s'])}; " if beside else "")
            + f"vmmtui first frame {fmt(r['first_frame_s'])}, both pids {fmt(r['pids_s'])} "
            f"{r['pids']}",
            flush=True,
        )
        runs.append(
            {
                "bare_first_frame_s": bare["first_frame_s"],
                **({"bare_with_probe_first_frame_s": beside["first_frame_s"]} if beside else {}),
                **({"before_first_frame_s": before["first_frame_s"]} if before else {}),
                **r,
            }
        )
        if bare["first_frame_s"] is not None:
            bares.append(bare["first_frame_s"])
        if r["first_frame_s"] is not None:
            firsts.append(r["first_frame_s"])
        if r["pids_s"] is not None:
            pidss.append(r["pids_s"])
    if not firsts or (a.workers and not pidss) or not bares:
        print(
            "startup-time: the inspector (or the bare app) did not show its first frame and both pids",
            file=sys.stderr,
        )
        return 1
    first, bare = statistics.median(firsts), statistics.median(bares)
    pids = statistics.median(pidss) if pidss else None
    print(
        f"vmmtui {' '.join(argv) or '(defaults)'} at {cols}x{rows}, {a.runs} runs on {os.uname().nodename}: "
        f"first frame median {first:.3f} s (max {max(firsts):.3f}), "
        + (f"both pids median {pids:.3f} s (max {max(pidss):.3f}); " if pids else "")
        + f"bare Textual first frame median {bare:.3f} s (max {max(bares):.3f}): "
        f"vmmtui/bare {first / bare:.2f}x (goal <= 1.20x)"
    )
    if befores:
        before = statistics.median(befores)
        print(
            f"before ({a.before_tree}): first frame median {before:.3f} s = {before / bare:.2f}x "
            f"the bare app; after/before {first / before:.2f}x"
        )
    if probed:
        beside = statistics.median(probed)
        print(
            f"bare Textual with the capability probe started beside it: first frame median "
            f"{beside:.3f} s = {beside / bare:.2f}x the bare app alone (vmmtui {first / beside:.2f}x "
            "of it): near vmmtui's ratio means the probe running beside the app explains the gap"
        )
    if a.json:
        summary = {
            "host": os.uname().nodename,
            "argv": argv,
            "size": a.size,
            "runs": runs,
            "first_frame_median_s": first,
            "pids_median_s": pids,
            "bare_first_frame_median_s": bare,
            "ratio": first / bare,
            **(
                {
                    "before_tree": a.before_tree,
                    "before_first_frame_median_s": statistics.median(befores),
                    "before_ratio": statistics.median(befores) / bare,
                }
                if befores
                else {}
            ),
            **(
                {"bare_with_probe_first_frame_median_s": statistics.median(probed)}
                if probed
                else {}
            ),
        }
        Path(a.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
