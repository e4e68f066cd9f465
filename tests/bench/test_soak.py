"""200 memfd sessions in a row from one process: nothing may accumulate."""

import os

from vmmtui.backends import Choice
from vmmtui.bench.soak import soak
from vmmtui.config import SessionConfig

MEMFD = Choice("memfd", "memfd backend requested (CPU memory, not GPU memory)")


def test_200_sessions_leave_fds_children_tmp_and_memory_as_they_were(tmp_path):
    result = soak(
        SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path)), 200, choice=MEMFD
    )
    assert result.ok, result.problems
    assert result.verified == 200
    assert (result.end.fds, result.end.children, result.end.tmp_entries) == (
        result.start.fds,
        result.start.children,
        result.start.tmp_entries,
    )


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
