"""``vmmtui trace -- CMD`` in a real terminal opens the inspector (as htop does); q, Ctrl-C and a
closed terminal end the trace and CMD's process tree within 2 s; CMD's exit code is kept where
CMD ended by itself. Real eBPF, real processes (slow tier)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "tui"))
from terminal import Terminal, alive  # noqa: E402

#: serial: the trace and its command tree end within 2 s
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ebpf"), pytest.mark.serial]

#: a command whose tree lives long: a shell and its child
LONG = ["sh", "-c", "sleep 120 & sleep 120; wait"]


def tree_of(term: Terminal) -> list[int]:
    """The traced command's processes (the app's children), once they run."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pids = term.workers()
        sleeps = [p for p in pids if _name(p) == "sleep"]
        if len(sleeps) >= 2:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"the command did not start: {term.text[-1500:]!r}")


def _name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.NoSuchProcess:
        return ""


@pytest.mark.parametrize("how", ["q", "ctrl-c", "closed terminal"])
def test_the_inspector_ends_the_trace_and_the_command_tree_within_2_s(tmp_path, how):
    term = Terminal(tmp_path, "trace", "--", *LONG, width=120, height=40)
    try:
        term.wait_for("wire: transfers between processes", 60)
        tree = tree_of(term)
        term.wait_for("LIVE · call", 30)
        if how == "q":
            term.press("q")
        elif how == "ctrl-c":
            term.press("\x03")
        else:
            term.close_terminal()
        took = term.ended_within(10)
        assert took is not None and took < 2.0, f"{how}: ended after {took} s"
        time.sleep(0.2)
        assert alive(tree) == [], f"{how}: left {alive(tree)}"
        if how != "closed terminal":
            assert "Traceback" not in term.text
    finally:
        term.close()


def test_the_commands_exit_code_is_kept_where_it_ended_by_itself(tmp_path):
    script = (
        "import os, socket; a, b = socket.socketpair(); os.memfd_create('x'); raise SystemExit(5)"
    )
    term = Terminal(tmp_path, "trace", "--", sys.executable, "-c", script, width=160, height=48)
    try:
        term.wait_for('memfd_create("x")', 90)
        term.wait_for("ENDED · call", 30)
        assert "exited with code 5" in term.text
        term.press("q")
        assert term.ended_within(10) is not None
        assert term.proc.returncode == 5
    finally:
        term.close()
