"""200 memfd sessions in a row from one process: nothing may accumulate."""

import os
import secrets
from pathlib import Path

import pytest

from vmmtui.backends import Choice
from vmmtui.bench.soak import soak
from vmmtui.plan.config import SessionConfig
from vmmtui.session.tmpdir import choose_parent

#: serial: memory and fds that must not grow over 200 sessions
pytestmark = pytest.mark.serial

MEMFD = Choice("memfd", "memfd backend requested (CPU memory, not GPU memory)")


def sessions_leave_everything_as_it_was(tmp_path, count: int) -> None:
    result = soak(
        SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path)), count, choice=MEMFD
    )
    assert result.ok, result.problems
    assert result.verified == count
    assert (result.end.fds, result.end.children, result.end.session_dirs) == (
        result.start.fds,
        result.start.children,
        result.start.session_dirs,
    )


@pytest.mark.slow
def test_12_sessions_leave_fds_children_dirs_and_memory_as_they_were(tmp_path):
    """Past the 10 sessions of warm-up, so that memory is compared too (200: the soak marker)."""
    sessions_leave_everything_as_it_was(tmp_path, 12)


@pytest.mark.soak
def test_200_sessions_leave_fds_children_dirs_and_memory_as_they_were(tmp_path):
    sessions_leave_everything_as_it_was(tmp_path, 200)


def test_other_programs_files_in_tmpdir_are_not_counted_but_our_directories_are(tmp_path):
    """Another program makes and removes files in TMPDIR meanwhile: not ours, not a problem;
    a session directory of ours left behind is one. Where the sessions make their directories:
    TMPDIR, or the short place they move to when TMPDIR is too long for a socket path."""
    parent = Path(choose_parent(str(tmp_path))[0])
    mark = f"{os.getpid()}-{secrets.token_hex(4)}"
    theirs = [parent / f"someone-elses-{mark}.{n}" for n in ("lock", "tmp", "other.tmp")]
    left: list[Path] = []
    theirs[0].touch()

    def others(i, session):
        if i == 1:
            theirs[0].unlink()  # the count goes down
            theirs[1].touch()
            theirs[2].touch()  # and up again, beyond where it was

    def leak(i, session):
        left.append(parent / f"vmmtui-{os.getpid()}-left{i}-{mark}")
        left[-1].mkdir()

    config = SessionConfig(backend="memfd", size=4096, tmpdir=str(tmp_path))
    try:
        result = soak(config, 2, others, choice=MEMFD)
        assert result.ok, result.problems
        result = soak(config, 2, leak, choice=MEMFD)
        assert not result.ok and "session_dirs: 0 at the start, 2 at the end" in result.problems
    finally:
        for p in theirs:
            p.unlink(missing_ok=True)
        for d in left:
            d.rmdir()


def test_soak_notices_a_leak(tmp_path):
    kept = []

    def leak(i, session):  # what a session that forgot an fd would do
        kept.append(os.open("/dev/null", os.O_RDONLY))

    try:
        result = soak(
            SessionConfig(backend="memfd", size=4096, tmpdir=str(tmp_path)), 3, leak, choice=MEMFD
        )
    finally:
        for fd in kept:
            os.close(fd)
    assert not result.ok and any(p.startswith("fds: ") for p in result.problems)
