"""Re-make the screenshots of the key moments: start, fd exported, fd received (kcmp), both
mappings made (the mapping cards), verified.

    python scripts/screenshots.py [--backend memfd|cuda|auto] [--out DIR] [--size 1MiB]
        [--mechanism legacy] [--consumers 4] [--direction consumer-writes] [--devices 0,1]
        [--moments received,mapped,verified] [--prefix NAME] [--no-png]
    python scripts/screenshots.py --replay h100-vmm-1mib --steps 14,19 [--notes NOTES.md]

Drives the real app with Pilot (real worker processes), so the pictures show a real run on this
machine. Files: DIR/<backend>-<n>-<moment>.svg and .png. With ``--replay NAME`` it drives the
replay app instead, on a recording (a file or a gallery name) at each of ``--steps``: files
DIR/replay-<name>-step<N>.svg and .png. The PNG is the SVG drawn by headless
Chromium (``chromium-headless-shell`` or ``chromium``; Debian: ``apt install chromium-headless-shell
fonts-dejavu-core``), which honours the SVG's font list (Fira Code, else the system's monospace) and
its per-span positions: a proportional font (cairosvg's fallback) makes text overlap. Without a
Chromium the PNGs are skipped with one line saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import re
import shutil
import subprocess
from pathlib import Path

from vmmtui.backends import choose
from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.stream.sizes import parse_size
from vmmtui.tui.app import InspectorApp

CHROMIUMS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


def moments(plan: list[tuple[str, str]]) -> list[tuple[str, int]]:
    """Start, the export, the first consumer's receive, its map (both mapping cards), and the last
    step before cleanup."""
    first_receive = next(i for i, (role, step) in enumerate(plan) if step == "receive")
    first_map = next(
        i for i, (role, step) in enumerate(plan) if role != "producer" and step.startswith("map")
    )
    last = max(i for i, (_, step) in enumerate(plan) if step != "cleanup")
    return [
        ("start", 0),
        ("fd-exported", plan.index(("producer", "export")) + 1),
        ("fd-received-kcmp", first_receive + 1),
        ("verified", last + 1),
        ("mapped", first_map + 1),
    ]


def to_png(svg: Path) -> Path | None:
    """Draw ``svg`` with headless Chromium at its own size; None when no Chromium is installed."""
    browser = next((b for b in map(shutil.which, CHROMIUMS) if b), None)
    if browser is None:
        return None
    head = svg.read_text(encoding="utf-8")[:400]
    width, height = (
        round(float(v)) + 1 for v in re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', head).groups()
    )
    png = svg.with_suffix(".png")
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--hide-scrollbars",
            "--disable-gpu",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            svg.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return png


async def shoot(
    backend: str,
    out: Path,
    size: int,
    width: int,
    height: int,
    config: dict | None = None,
    only: list[str] | None = None,
    prefix: str | None = None,
) -> list[Path]:
    choice = choose(backend)
    if not choice.usable:
        raise SystemExit(choice.reason)
    config = config or {}
    app = InspectorApp(SessionConfig(backend=choice.name, size=size, kernel=True, **config), choice)
    plan = build_plan(
        config.get("mechanism", "vmm"),
        config.get("consumers", 1),
        config.get("direction", "producer-writes"),
    )
    wanted = [
        (n, m)
        for n, m in enumerate(moments(plan), 1)
        if not only or m[0].split("-")[-1] in only or m[0] in only
    ]
    wanted.sort(
        key=lambda nm: nm[1][1]
    )  # in plan order (the numbers in the names stay as they were)
    saved: list[Path] = []
    async with app.run_test(size=(width, height)) as pilot:
        while app.session is None or not app.session.started:
            await pilot.pause(0.05)
        for n, (name, upto) in wanted:
            while app.session.position < upto:
                before = app.session.position
                await pilot.press("space")
                while not (app.session.position > before and not app.busy):
                    if app.session.failure:
                        raise SystemExit(f"step failed: {app.session.failure.one_line()}")
                    await pilot.pause(0.05)
            await pilot.pause(0.6)
            fname = f"{prefix or choice.name}-{n}-{name}.svg"
            app.save_screenshot(filename=fname, path=str(out))
            saved.append(out / fname)
        await pilot.press("q")
        while not app.session.closed:
            await pilot.pause(0.05)
    return saved


async def shoot_replay(
    name: str, steps: list[int], out: Path, width: int, height: int, notes: str | None
) -> list[Path]:
    """The replay app on a recording, at each of ``steps`` (stepped to with →)."""
    from vmmtui.pipeline.replay import resolve
    from vmmtui.record import Timeline
    from vmmtui.record.notes import read as read_notes
    from vmmtui.tui.replay import ReplayApp

    rec = resolve(name)
    stem = Path(name).name.split(".")[0]
    bound = read_notes(notes, Timeline(rec.events)) if notes else None
    app = ReplayApp(rec, notes=bound)
    saved = []
    async with app.run_test(size=(width, height)) as pilot:
        await pilot.pause()
        for n in steps:  # stepped to, frame by frame, as → does in a lecture
            for k in range(app.frame + 1, app.timeline.frame_of_step(n) + 1):
                app.goto(k)
                await pilot.pause()
            await pilot.pause(0.6)
            fname = f"replay-{stem}-step{n}.svg"
            app.save_screenshot(filename=fname, path=str(out))
            saved.append(out / fname)
        await pilot.press("q")
    return saved


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--backend", default="memfd")
    p.add_argument("--out", default="screenshots")
    p.add_argument("--size", default="1MiB")
    p.add_argument("--width", type=int, default=160)
    p.add_argument("--height", type=int, default=48)
    p.add_argument("--mechanism", default="vmm")
    p.add_argument("--consumers", type=int, default=1)
    p.add_argument("--direction", default="producer-writes")
    p.add_argument("--transport", default="scm-rights", help="scm-rights or pidfd")
    p.add_argument("--devices", help="0,1")
    p.add_argument(
        "--moments",
        help="comma-separated: start, exported, kcmp (or received), mapped, verified "
        "(default: all but mapped)",
    )
    p.add_argument("--no-png", action="store_true", help="SVGs only")
    p.add_argument(
        "--png",
        nargs="+",
        metavar="SVG",
        help="only draw these SVGs as PNGs (e.g. ones made on a GPU box)",
    )
    p.add_argument("--prefix", help="file name prefix (default: the backend)")
    p.add_argument("--replay", metavar="FILE|NAME", help="a recording: the replay app, not a run")
    p.add_argument("--steps", default="0", help="--replay: the steps to picture, e.g. 14,19")
    p.add_argument("--notes", help="--replay: a teacher's notes file")
    a = p.parse_args()
    if a.png:
        for svg in map(Path, a.png):
            if to_png(svg) is None:
                raise SystemExit(
                    "no headless Chromium here (apt install chromium-headless-shell fonts-dejavu-core)"
                )
        print(f"drew {len(a.png)} PNGs")
        return
    config = {
        "mechanism": a.mechanism,
        "consumers": a.consumers,
        "direction": a.direction,
        "transport": a.transport,
    }
    if a.devices:
        config["devices"] = [int(d) for d in a.devices.split(",")]
    only = (
        a.moments.replace("received", "kcmp").split(",")
        if a.moments
        else ["start", "exported", "kcmp", "verified"]
    )
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.replay:
        steps = [int(n) for n in a.steps.split(",")]
        saved = asyncio.run(shoot_replay(a.replay, steps, out, a.width, a.height, a.notes))
    else:
        saved = asyncio.run(
            shoot(a.backend, out, parse_size(a.size), a.width, a.height, config, only, a.prefix)
        )
    if not a.no_png:
        pngs = [to_png(svg) for svg in saved]
        if None in pngs:
            print(
                "no PNGs: no headless Chromium here (apt install chromium-headless-shell fonts-dejavu-core)"
            )
    print(
        f"saved {len(saved)} screenshots on {platform.node()}: " + ", ".join(str(s) for s in saved)
    )


if __name__ == "__main__":
    main()
