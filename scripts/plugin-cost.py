"""What the pytest plugin costs a test: the same tests run by pytest without the plugin, with
``--vmmtui`` (eBPF where this process may load it) and with ``--vmmtui --vmmtui-poll``; each
test's call phase timed by pytest (``--durations``), the median per kind of test, and the ratio.

    python3 scripts/plugin-cost.py [--repeat 10]

Two kinds of test: one that does nothing (the fixed cost: the probe loaded and attached, or the
poller started, then stopped and the verdict made) and one weight-sync step of
``tests/fixtures/verdict_suite`` (three 1 MiB buckets to a receiver process that drops each).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = """
import pytest
from buckets import sync


@pytest.mark.parametrize("n", range({repeat}))
def test_nothing(n):
    pass


@pytest.mark.parametrize("n", range({repeat}))
def test_sync(n):
    sync(steps=3, keep=False)
"""


#: the plugin by its entry point where vmmtui is installed, else named (a tree on PYTHONPATH)
PLUGIN = (
    []
    if any(e.name == "vmmtui" for e in importlib.metadata.entry_points(group="pytest11"))
    else ["-p", "vmmtui.verdict.plugin"]
)


def timed(folder: Path, *args: str) -> dict[str, list[float]]:
    """Each kind of test's call durations (s) in one pytest run with ``args``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VMMTUI_"))}
    # the suite's helpers, this tree, and whatever the caller's path already had (a carried site)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(
            None,
            [str(ROOT / "tests" / "fixtures" / "verdict_suite"), str(ROOT), env.get("PYTHONPATH")],
        )
    )
    env["VERDICT_HOLD"] = "0"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--durations=0"]
        + [*PLUGIN, "--durations-min=0", str(folder / "test_cost.py"), *args],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=900,
    )
    if res.returncode != 0:
        sys.exit(f"plugin-cost: pytest failed:\n{res.stdout[-3000:]}{res.stderr[-2000:]}")
    out: dict[str, list[float]] = {"nothing": [], "sync": []}
    for s, kind in re.findall(r"^([\d.]+)s call\s+\S+::test_(\w+)\[", res.stdout, re.M):
        out[kind].append(float(s))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10, help="tests of each kind per run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="vmmtui-cost-") as tmp:
        folder = Path(tmp)
        (folder / "test_cost.py").write_text(SUITE.format(repeat=args.repeat))
        runs = {
            "off": timed(folder),
            "--vmmtui": timed(folder, "--vmmtui"),
            "--vmmtui --vmmtui-poll": timed(folder, "--vmmtui", "--vmmtui-poll"),
        }
    from vmmtui.trace.loader import why_not

    print(f"plugin-cost: {args.repeat} tests of each kind, median call time; eBPF here: "
          f"{why_not() or 'yes'}")  # fmt: skip
    base = {k: statistics.median(v) for k, v in runs["off"].items()}
    for name, got in runs.items():
        parts = []
        for kind, times in got.items():
            m = statistics.median(times)
            extra = ""
            if name != "off":  # pytest says durations to 10 ms: a ratio of nothing is not one
                ratio = f", x{m / base[kind]:.1f}" if base[kind] >= 0.01 else ""
                extra = f" (+{(m - base[kind]) * 1e3:.0f} ms{ratio})"
            parts.append(f"{kind}: {m * 1e3:.0f} ms{extra}")
        print(f"  {name:24} " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
