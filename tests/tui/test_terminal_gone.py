"""A terminal that goes away without a SIGHUP (vmmtui has no controlling terminal: ``setsid -w
vmmtui …`` or ``runuser`` in a tmux pane, then ``tmux kill-session``) ends vmmtui as SIGHUP does:
gone within 2 s, its workers and its session directory with it. Before, reads gave EOF for ever,
Textual's input thread spun at 75–80 % of a CPU and vmmtui lived on with PPID 1."""

from __future__ import annotations

import signal
import time

import pytest
from terminal import Terminal, alive

pytestmark = pytest.mark.slow

#: 2 s promised; a loaded 2-core machine gets some slack
LIMIT_S = 3.0


@pytest.mark.parametrize(
    "args",
    [("replay", "h100-vmm-1mib", "--autoplay", "--pace", "0.01"), ("--backend", "memfd")],
    ids=["replay", "inspector"],
)
def test_a_closed_terminal_that_is_not_the_controlling_one_ends_vmmtui(tmp_path, args):
    term = Terminal(tmp_path, *args, width=120, height=40, controlling=False)
    try:
        term.wait_for("REPLAY" if args[0] == "replay" else "producer", timeout=60)
        deadline = time.monotonic() + 60
        while args[0] != "replay" and not term.workers() and time.monotonic() < deadline:
            time.sleep(0.1)  # the inspector's workers start
        workers = term.workers()
        assert workers or args[0] == "replay", "the inspector's workers never started"
        term.close_terminal()
        took = term.ended_within(LIMIT_S)
        assert took is not None, f"still running {LIMIT_S} s after its terminal went away"
        assert term.proc.returncode == 128 + signal.SIGHUP
        assert alive(workers) == []
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("vmmtui-")] == []
    finally:
        term.close()
