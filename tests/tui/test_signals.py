"""SIGHUP, SIGTERM, SIGINT and a closed terminal at any moment of the inspector (idle, mid-step) and
of a replay, on a real pseudo-terminal: the workers stopped, the directory removed, exit 128 +
signal with one line (none when the terminal is gone) within 2 s, no traceback. Ctrl-C is SIGINT."""

from __future__ import annotations

import os
import signal
import time

import pytest
from terminal import Terminal, alive

#: the slow tier: left out of the default run (README), run by .ci/run after it
#: serial: each signal ends the app within 4 s
pytestmark = [pytest.mark.slow, pytest.mark.serial]

#: the first frame is drawn; the steps list says the next one
READY = "space Next"
#: the producer's fill of 512 MiB takes seconds: a step that is running when the signal comes
BIG = ("--size", "512MiB")
#: a loaded 2-core machine gets some slack over the 2 s promised
LIMIT_S = 4.0


def start(tmp_path, *args: str) -> Terminal:
    term = Terminal(tmp_path, "--backend", "memfd", *(args or ("--size", "1MiB")))
    term.wait_for(READY)
    term.wait_for("worker started")  # the workers said hello
    return term


def running_fill(term: Terminal) -> None:
    """Step to the producer's fill (seconds long) and start it: a step is running."""
    for _ in range(7):  # init, query, create, reserve, map, set_access, fill
        term.press(" ")
    term.wait_for("running fill", timeout=60)


def check_ended(term: Terminal, tmp_path, workers: list[int], signum: int | None, took) -> None:
    try:
        assert took is not None, f"still running after {LIMIT_S} s: {term.text[-1500:]!r}"
        tail = term.text[-3000:]
        assert "Traceback" not in tail and "never awaited" not in tail, tail
        if signum is not None:
            assert term.proc.returncode == 128 + signum, (term.proc.returncode, tail)
            assert f"vmmtui: interrupted by {signal.Signals(signum).name}" in tail, tail
        # a worker's reaper outlives a SIGKILLed producer by the moment it takes to clean up
        deadline = time.monotonic() + 1.0
        while alive(workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(workers) == [], "workers left running"
        assert [n for n in os.listdir(tmp_path) if n.startswith("vmmtui-")] == []
    finally:
        term.close()


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"]
)
@pytest.mark.parametrize("when", ["idle", "mid-step"])
def test_a_signal_ends_the_inspector_cleanly(tmp_path, signum, when):
    term = start(tmp_path, *BIG)
    if when == "mid-step":
        running_fill(term)
    workers = term.workers()
    assert workers
    term.proc.send_signal(signum)
    check_ended(term, tmp_path, workers, signum, term.ended_within(LIMIT_S))


@pytest.mark.parametrize("when", ["idle", "mid-step"])
def test_closing_the_terminal_ends_the_inspector_and_leaves_nothing(tmp_path, when):
    term = start(tmp_path, *BIG)
    if when == "mid-step":
        running_fill(term)
    workers = term.workers()
    term.close_terminal()
    check_ended(term, tmp_path, workers, None, term.ended_within(LIMIT_S))


def test_ctrl_c_quits_cleanly_as_sigint(tmp_path):
    """Ctrl-C reaches the app as a key, not a signal: it ends it as SIGINT does (130, one line)."""
    term = start(tmp_path)
    workers = term.workers()
    term.press("\x03")
    check_ended(term, tmp_path, workers, signal.SIGINT, term.ended_within(LIMIT_S))


def test_a_replay_ends_on_sigterm_and_on_a_closed_terminal(tmp_path):
    term = Terminal(tmp_path, "replay", "cpu-memfd-1mib")
    term.wait_for("REPLAY")
    term.proc.send_signal(signal.SIGTERM)
    check_ended(term, tmp_path, [], signal.SIGTERM, term.ended_within(LIMIT_S))
    term = Terminal(tmp_path, "replay", "cpu-memfd-1mib")
    term.wait_for("REPLAY")
    term.press("q")
    term.close_terminal()  # q, then the terminal closes at once
    check_ended(term, tmp_path, [], None, term.ended_within(LIMIT_S))
