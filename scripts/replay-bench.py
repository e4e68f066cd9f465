#!/usr/bin/env python3
"""Replay speed and recording size, measured (issue 14's targets; not asserted in tests).

    python scripts/replay-bench.py [--backend memfd] [--out bench/results/replay-memfd.json]

1. A default session (1 MiB) recorded with `vmmtui run --record`: its size (< 200 KiB), plain and gzipped.
2. A 1 GiB session recorded the same way, replayed: the time from reading the file to the first
   frame drawn (< 0.5 s), read + timeline + app start + first paint, in one process (Python's own
   start and imports reported apart).
3. Every step back and forward in that replay: the redraw (< 50 ms), median and worst, from the
   key's action to the repainted screen (a callback that runs after the next paint); apart, the
   rebuild of the state shown alone (a cached state per frame), and a repaint of the same screen
   with nothing changed (the floor any redraw of a 160x48 screen has on this machine). Issue 24's
   target: a step back costs at most 1.2x that floor, measured in the same run (only what changed
   is repainted).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def record(backend: str, size: str, path: Path) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "vmmtui",
            "run",
            "--backend",
            backend,
            "--size",
            size,
            "--record",
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        sys.exit(f"recording failed: {res.stderr.strip()}")
    return time.perf_counter() - t0


async def replay_times(path: Path) -> dict:
    t0 = time.perf_counter()
    from vmmtui.pipeline.replay import read
    from vmmtui.tui.replay import ReplayApp

    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    rec = read(path)
    t_read = time.perf_counter() - t0
    app = ReplayApp(rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        first = time.perf_counter() - t0
        back, forward = [], []

        async def redraw(action, into: list) -> None:
            """From the key's action to the repainted screen (the callback runs after the next paint)."""
            painted = asyncio.Event()
            t = time.perf_counter()
            action()
            app.call_after_refresh(lambda: (into.append(time.perf_counter() - t), painted.set()))
            await painted.wait()

        app.action_last()
        await pilot.pause()
        for _ in range(len(app.timeline) - 1):
            await redraw(app.action_back, back)
        for _ in range(len(app.timeline) - 1):
            await redraw(app.action_step, forward)
        # the same, split: the rebuild alone (widget state, no paint), and a repaint of every widget
        # of the same screen with nothing changed (what any full redraw costs on this machine)
        rebuild, repaint = [], []
        for k in range(len(app.timeline) - 1, 0, -1):
            t = time.perf_counter()
            app.goto(k - 1)
            rebuild.append(time.perf_counter() - t)
            await pilot.pause()
        for _ in range(len(app.timeline) - 1):
            await redraw(
                lambda: [w.refresh(layout=True) for w in app.screen.walk_children()], repaint
            )
        frames, events = len(app.timeline), len(rec.events)

    def ms(xs: list[float]) -> dict[str, float]:
        return {
            "median_ms": round(statistics.median(xs) * 1e3, 2),
            "max_ms": round(max(xs) * 1e3, 2),
        }

    return {
        "imports_s": round(t_import, 3),
        "read_s": round(t_read, 4),
        "first_frame_s": round(first, 3),
        "frames": frames,
        "events": events,
        "back": ms(back),
        "forward": ms(forward),
        "back_rebuild_only": ms(rebuild),
        "repaint_unchanged_screen": ms(repaint),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="memfd")
    p.add_argument("--big", default="1GiB", help="the size of the large recording (default 1GiB)")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="vmmtui-replay-bench-") as tmp:
        small, big = Path(tmp) / "default.jsonl", Path(tmp) / "big.jsonl"
        record(a.backend, "1MiB", small)
        took = record(a.backend, a.big, big)
        times = asyncio.run(replay_times(big))
        result = {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": f"{platform.node()} · {platform.processor() or platform.machine()} · {os.cpu_count()} CPUs",
            "backend": a.backend,
            "default_recording_bytes": small.stat().st_size,
            "default_recording_gzip_bytes": len(gzip.compress(small.read_bytes())),
            "big_size": a.big,
            "big_recording_bytes": big.stat().st_size,
            "big_session_s": round(took, 2),
            **times,
        }
    ok = {
        "default recording < 200 KiB": result["default_recording_bytes"] < 200 * 1024,
        "first frame < 0.5 s": result["first_frame_s"] < 0.5,
        "step back < 50 ms (worst)": result["back"]["max_ms"] < 50,
        "step forward < 50 ms (worst)": result["forward"]["max_ms"] < 50,
        "step back <= 1.2x an unchanged repaint (median)": result["back"]["median_ms"]
        <= 1.2 * result["repaint_unchanged_screen"]["median_ms"],
    }
    result["targets"] = ok
    print(json.dumps(result, indent=2))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
