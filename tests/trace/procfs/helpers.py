"""Running ``vmmtui watch``/``attach`` on the real fixtures, as a user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.commands import vmmtui
from vmmtui.stream.events import Event

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"


def watch_json(
    fixture: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, list[Event]]:
    res = vmmtui("watch", "--json", "--", sys.executable, str(FIXTURES / fixture), env=env)
    events = [Event.from_json(line) for line in res.stdout.splitlines() if line.startswith("{")]
    return res, events


def of(events: list[Event], cls: type) -> list:
    return [e for e in events if isinstance(e, cls)]
