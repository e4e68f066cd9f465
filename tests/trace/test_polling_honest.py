"""Polling says what it cannot know (real processes, polled as a user without eBPF would):
memfds that arrive and are still open at the exit are possible leaks -- polling sees an fd
appear, not the recvmsg that put it there, and its sender closed its own copy between two
polls -- and a poll that found nothing never draws the green "nothing wrong found"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import reduce
from pathlib import Path

import pytest

from vmmtui.stream.events import Event, Leak, LeakKind
from vmmtui.words.leaks import said as leak_words

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def polled(*command: str) -> list[Event]:
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--json", "--poll", "--no-cuda", "--", *command],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "FIXTURE_HOLD": "1.0", "FIXTURE_GAP": "0.4", "NO_COLOR": "1"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return [Event.from_dict(json.loads(line)) for line in res.stdout.splitlines()]


def verdicts(events: list[Event]) -> str:
    """The verdicts panel's head as the inspector draws it from this stream."""
    from textual._context import active_app
    from textual.app import App

    from vmmtui.tui.widgets.wire import VerdictsPanel
    from vmmtui.view.programs import ProgramsView, fold_program_event

    v = reduce(fold_program_event, events, ProgramsView())
    token = active_app.set(App())  # the panel wraps its rows with its app's console
    try:
        return VerdictsPanel()._findings(v).plain  # noqa: SLF001 (the panel's own text)
    finally:
        active_app.reset(token)


def test_memfds_piling_up_in_a_polled_receiver_are_possible_leaks_never_green():
    events = polled(sys.executable, str(FIXTURES / "memfd_pins.py"), "dups", "5")
    possible = [e for e in events if isinstance(e, Leak)
                and e.kind == LeakKind.POSSIBLE_HELD_UNTIL_EXIT]  # fmt: skip
    assert len(possible) >= 4, [e for e in events if isinstance(e, Leak)]
    assert all("bucket-" in e.target and "cannot tell" in leak_words(e)[1] for e in possible)
    head = verdicts(events)
    assert "nothing wrong found" not in head and "to look at" in head


def test_a_poll_that_saw_nothing_says_so_without_a_green_verdict():
    events = polled(sys.executable, "-c", "import time; time.sleep(0.5)")
    assert not [e for e in events if isinstance(e, Leak)]
    head = verdicts(events)
    assert "nothing wrong found" not in head and "nothing polling can see wrong" in head
