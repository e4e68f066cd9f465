"""A trace's memory over time: ``vmmtui trace`` (``--json``, ``--text``, or the inspector in a pseudo-terminal)
follows trace-bench.py's load (a memfd shared over a socket, RATE shares a second) for SECONDS,
and the tracer's resident set size is read from /proc every EVERY seconds; then q (the inspector)
or SIGINT (``--json``, ``--text``) ends it, and how long the end took is said.

    sudo python3 scripts/trace-memory.py --mode json --rate 2000 --seconds 600 --out FILE
    sudo python3 scripts/trace-memory.py --mode inspector --rate 2000 --seconds 30 --tree DIR

``--tree`` runs the vmmtui of another checkout (a revision to compare with, in the same run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def bpf_links(pid: int) -> int:
    """The BPF links (the tracer's attached probes) among ``pid``'s fds."""
    n = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:bpf_link"
    return n


def measure(mode: str, rate: int, seconds: float, every: float, tree: Path, python: str) -> dict:
    shares = int(rate * seconds * 1.05) + rate  # the load outlives the sampling
    load = [python, str(ROOT / "scripts" / "trace-bench.py"), "--load", str(shares), str(rate)]
    env = dict(os.environ, PYTHONPATH=str(tree), COLUMNS="160", LINES="48", TERM="xterm-256color")
    cmd = [python, "-m", "vmmtui", "trace", "--no-cuda"]
    master = None
    if mode in ("json", "text"):
        proc = subprocess.Popen(
            [*cmd, f"--{mode}", "--", *load],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tree,
            env=env,
        )
        lines = [0]

        def drain() -> None:
            assert proc.stdout is not None
            for _ in proc.stdout:
                lines[0] += 1

        threading.Thread(target=drain, daemon=True).start()
    else:
        master, slave = pty.openpty()
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
        proc = subprocess.Popen(
            [*cmd, "--", *load],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=tree,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        screen = bytearray()

        def drain() -> None:
            while True:
                try:
                    r, _, _ = select.select([master], [], [], 0.5)
                    if r:
                        chunk = os.read(master, 1 << 16)
                        if not chunk:
                            return
                        screen.extend(chunk[-4096:])
                        del screen[:-8192]
                except OSError:
                    return

        threading.Thread(target=drain, daemon=True).start()
    t0 = time.monotonic()
    samples: list[tuple[float, float]] = []
    links = 0
    while time.monotonic() - t0 < seconds and proc.poll() is None:
        time.sleep(every - (time.monotonic() - t0) % every)
        mb = rss_mb(proc.pid)
        if mb is not None:
            samples.append((round(time.monotonic() - t0, 1), round(mb, 1)))
            links = max(links, bpf_links(proc.pid))
            print(f"{mode} {samples[-1][0]:7.1f}s {mb:8.1f} MB", file=sys.stderr, flush=True)
    end0 = time.monotonic()
    if mode == "inspector" and master is not None:
        os.write(master, b"q")
    else:
        proc.send_signal(signal.SIGINT)
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    ended_s = time.monotonic() - end0
    if master is not None:
        os.close(master)
    first_min = [mb for t, mb in samples if t >= min(60, seconds / 3)]
    return {
        "mode": mode,
        "rate": rate,
        "seconds": seconds,
        "samples": samples,
        "peak_mb": max((mb for _, mb in samples), default=None),
        #: from the first sample after a minute (a third of the run, if shorter) to the last
        "growth_after_first_minute": (
            round(first_min[-1] / first_min[0] - 1, 3) if len(first_min) > 1 else None
        ),
        "ended_s": round(ended_s, 2),
        "exit": rc,
        #: the probes attached while it ran (they go with the process: it is gone at "ended_s")
        "bpf_links": links,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["json", "text", "inspector"], default="json")
    p.add_argument("--rate", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--every", type=float, default=10)
    p.add_argument("--tree", default=str(ROOT), help="the checkout whose vmmtui runs")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--out", help="append the result as JSON to this file")
    a = p.parse_args()
    result = measure(a.mode, a.rate, a.seconds, a.every, Path(a.tree), a.python)
    result["tree"] = a.tree
    print(json.dumps(result))
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
