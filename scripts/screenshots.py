"""Re-make the SVG screenshots of the key moments: start, fd exported, fd received (kcmp), verified.

    python scripts/screenshots.py [--backend memfd|cuda|auto] [--out DIR] [--size 1MiB]

Drives the real app with Pilot (real worker processes), so the pictures show a real run on this
machine. Files: DIR/<backend>-<n>-<moment>.svg (and .png when cairosvg is installed).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
from pathlib import Path

from vmmtui.app import InspectorApp
from vmmtui.backends import choose
from vmmtui.session import SessionConfig
from vmmtui.sizes import parse_size
from vmmtui.steps import PLAN

MOMENTS = [
    ("start", 0),
    ("fd-exported", PLAN.index(("producer", "export")) + 1),
    ("fd-received-kcmp", PLAN.index(("consumer", "receive")) + 1),
    ("verified", PLAN.index(("producer", "wait_ack")) + 1),
]


async def shoot(backend: str, out: Path, size: int, width: int, height: int) -> list[Path]:
    choice = choose(backend)
    if not choice.usable:
        raise SystemExit(choice.reason)
    app = InspectorApp(SessionConfig(backend=choice.name, size=size), choice)
    saved: list[Path] = []
    async with app.run_test(size=(width, height)) as pilot:
        while app.session is None or not app.session.started:
            await pilot.pause(0.05)
        for n, (name, upto) in enumerate(MOMENTS, 1):
            while app.session.position < upto:
                before = app.session.position
                await pilot.press("space")
                while not (app.session.position > before and not app.busy):
                    if app.session.failure:
                        raise SystemExit(f"step failed: {app.session.failure.one_line()}")
                    await pilot.pause(0.05)
            await pilot.pause(0.6)
            fname = f"{choice.name}-{n}-{name}.svg"
            app.save_screenshot(filename=fname, path=str(out))
            saved.append(out / fname)
        await pilot.press("q")
        while not app.session.closed:
            await pilot.pause(0.05)
    return saved


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--backend", default="memfd")
    p.add_argument("--out", default="screenshots")
    p.add_argument("--size", default="1MiB")
    p.add_argument("--width", type=int, default=160)
    p.add_argument("--height", type=int, default=48)
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    saved = asyncio.run(shoot(a.backend, out, parse_size(a.size), a.width, a.height))
    try:
        import cairosvg

        for svg in saved:
            cairosvg.svg2png(url=str(svg), write_to=str(svg.with_suffix(".png")))
    except ImportError:
        pass
    print(f"saved {len(saved)} screenshots on {platform.node()}: " + ", ".join(str(s) for s in saved))


if __name__ == "__main__":
    main()
