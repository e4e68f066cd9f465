"""Polling says what it saw, on real processes: a child first seen with its parent's file, sent
over SCM_RIGHTS after the fork, is not "inherited"; kcmp's answer about fd numbers that moved on
since the scan read them is never "different open file descriptions"."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.trace.procfs.helpers import FIXTURES
from vmmtui.stream.events import Arrival, FdOpened, SharedFile
from vmmtui.trace.procfs.follow import Follower
from vmmtui.words.narration import fd_opened

#: serial: polls timed to a fork (past one clock tick of /proc's start time) and 2 s windows
pytestmark = pytest.mark.serial

#: what a child first seen with its parent's file is told (the words a user reads)
UNSEEN_ARRIVAL = "arrived between two polls (how: not seen)"


def _start(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(FIXTURES / script), *args],
        cwd=FIXTURES,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _fork_and_poll(mode: str) -> tuple[list, int, int]:
    """Polls the parent once before it forks, then once after both hold the memfd: the child's
    FdOpened for it, the child's pid and the fd number both hold it at."""
    proc = _start("fork_then_send.py", mode)
    try:
        f = Follower({proc.pid}, tree=True, use_nvml=False)
        time.sleep(0.3)  # the interpreter is up: a memfd made before the fork is there to see
        events = f.poll()
        time.sleep(0.05)  # past one clock tick of /proc's start time
        proc.stdin.write("go\n")
        proc.stdin.flush()
        _, child, fd = proc.stdout.readline().split()
        events += f.poll()
        mine = [e for e in events if isinstance(e, FdOpened) and e.pid == int(child)]
        return [e for e in mine if e.fd == int(fd)], int(child), int(fd)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def test_a_child_sent_its_parents_file_after_the_fork_is_not_said_to_inherit_it():
    opened, child, fd = _fork_and_poll("after")
    assert len(opened) == 1, opened
    e = opened[0]
    assert e.how == Arrival.UNKNOWN and e.via == UNSEEN_ARRIVAL, e
    text = fd_opened(e).plain
    assert "inherited" not in text and "arrived between two polls (how: not seen)" in text, text


def test_a_child_forked_after_its_parent_was_seen_holding_the_file_inherits_it():
    opened, child, fd = _fork_and_poll("before")
    assert len(opened) == 1 and opened[0].how == Arrival.INHERITED, opened
    assert opened[0].source is not None and opened[0].source.fd == fd


@pytest.mark.slow
def test_fd_numbers_that_move_on_between_the_scan_and_kcmp_are_never_different():
    proc = _start("fd_churn.py")
    try:
        _, child = proc.stdout.readline().split()
        f = Follower({proc.pid, int(child)}, use_nvml=False, interval=0.0)
        events = []
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            events += f.poll()
        shared = [e for e in events if isinstance(e, SharedFile) and "fixture-churn" in e.target]
        assert shared, "the two memfds were never seen shared"
        different = [e for e in shared if e.same_description is False]
        assert not different, different[:3]
        assert f.tracker.shares is not None
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def test_an_fd_whose_direction_was_not_seen_is_drawn_without_an_arrow():
    from vmmtui.tui.widgets.programs import fd_row
    from vmmtui.view.programs import FdView

    unknown = fd_row(FdView(4, "unknown", "memfd:x", "", (10, 4), UNSEEN_ARRIVAL, "kcmp")).plain
    assert "≡ 10 fd 4" in unknown and "←" not in unknown
    arrived = fd_row(FdView(4, "arrived", "memfd:x", "", (10, 4), "", "kcmp")).plain
    assert "← 10 fd 4" in arrived
