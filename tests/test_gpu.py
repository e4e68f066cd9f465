"""The same whole sessions on the cuda backend (skipped where no GPU with VMM + POSIX fds exists)."""

import os

import pytest

from vmmtui.events import KcmpVerdict, SessionClosed, StepDone
from vmmtui.fdtable import FdTable
from vmmtui.session import Session, SessionConfig

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("size", [1 << 20, 1 << 30], ids=["1MiB", "1GiB"])
def test_cuda_session_verifies_and_fds_match_proc(size, clean_state):
    events = []
    s = Session(SessionConfig(backend="cuda", size=size, tmpdir=str(clean_state)))
    try:
        events += s.start()
        for e in s.run():
            events.append(e)
            if isinstance(e, StepDone) and e.step == "receive":
                rfd = e.report.state["received_fd"]
                table = FdTable.read(s.workers["consumer"].pid)
                assert table.entries[rfd].target.startswith("/dev/nvidia")
            if isinstance(e, StepDone) and e.step == "export":
                xfd = e.report.state["exported_fd"]
                assert xfd in FdTable.read(s.workers["producer"].pid).entries
    finally:
        events += s.close()
    assert s.verified and s.failure is None and s.fd_problems == 0
    query = next(e for e in events if isinstance(e, StepDone) and e.step == "query").report.state
    assert query["alloc_size"] % query["granularity"] == 0 and query["alloc_size"] >= size
    kc = [e for e in events if isinstance(e, KcmpVerdict)]
    assert kc and kc[-1].same is True
    assert isinstance(events[-1], SessionClosed) and events[-1].clean
    assert os.listdir(clean_state) == []
