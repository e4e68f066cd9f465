"""Screenshots of the trace inspector on a live trace of a command: the real TraceApp (eBPF, the
ledger, the same thread and repaints as `vmmtui trace -- CMD` in a terminal), headless at a
terminal size, saved as SVG at the first share or import, at the first finding and at the end.

    python scripts/trace-inspector-shots.py --out DIR [--name NAME] [--size 160x48] [--record FILE] -- CMD…

Needs root and libbpf (as `vmmtui trace`). PNGs: `python scripts/screenshots.py --png DIR/*.svg`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


async def shoot(
    command: list[str],
    out: Path,
    name: str,
    size: tuple[int, int],
    record: str,
    libcuda: str | None = None,
) -> int:
    from vmmtui.pipeline.session import TraceRequest
    from vmmtui.record.recording import Header, Machine, Recorder
    from vmmtui.trace.output import Output
    from vmmtui.tui.trace import TraceApp
    from vmmtui.words.findings import json_line

    out.mkdir(parents=True, exist_ok=True)
    recorder = None
    if record:
        header = Header(
            date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            machine=Machine.here(),
            driver=gpu_facts()[1],
            device=gpu_facts()[0],
            backend="trace",
            reason="vmmtui trace (eBPF)",
            options={"command": command, "pids": [], "all": False},
            title=f"trace of {' '.join(command)}"[:120],
        )
        recorder = Recorder(record, header, json_line)
    # the trace's one start, as `vmmtui trace` makes it; the command's output kept, as the
    # inspector does
    request = TraceRequest(tuple(command), libcuda=libcuda)
    app = TraceApp(
        start=lambda: request.start(stdout=Output()),
        title=" ".join(command)[:100],
        sink=recorder.write if recorder else None,
        recorded=recorder is not None,
    )
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    async with app.run_test(size=size) as pilot:
        for _ in range(int(600 / 0.2)):
            await pilot.pause(0.2)
            v = app.state_shown().programs
            if v is None:
                continue
            for moment, now in (
                ("shared", v.transfers_len > 0),
                ("finding", v.bad_findings > 0),
            ):
                if now and moment not in taken:
                    taken.add(moment)
                    await pilot.pause(0.3)
                    app.save_screenshot(filename=f"{name}-{moment}.svg", path=str(out))
            if app.ended and app.live_to >= len(app.timeline.events):
                break
        await pilot.pause(0.5)
        app.save_screenshot(filename=f"{name}-end.svg", path=str(out))
        print(f"{name}: {app.timeline.frames[-1].steps} calls; screenshots {sorted(taken)} + end")
        await pilot.press("q")
    if recorder is not None:
        recorder.close()
    exit_ = app.tracer.exit if app.tracer is not None else None
    return 0 if exit_ is None else exit_.status


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", default="trace-shots")
    p.add_argument("--name", default="trace")
    p.add_argument("--size", default="160x48")
    p.add_argument("--record", default="", metavar="FILE", help="also write the recording")
    p.add_argument("--libcuda", default=None, metavar="PATH", help="the libcuda.so.1 to probe")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    command = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not command:
        p.error("give the command after --")
    cols, rows = (int(v) for v in a.size.split("x"))
    return asyncio.run(shoot(command, Path(a.out), a.name, (cols, rows), a.record, a.libcuda))


def gpu_facts() -> tuple[str, str]:
    """(the GPU's name, the driver's version) as nvidia-smi says, for the recording's header."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.splitlines()[0]
        name, driver = (x.strip() for x in out.split(",", 1))
        return name, driver
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return "", ""


if __name__ == "__main__":
    sys.exit(main())
