"""Whole memfd sessions with real worker processes, checked against the kernel."""

import os
import signal

import psutil
import pytest

from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.session import Session, SessionError
from vmmtui.session.tmpdir import sweep_stale_dirs
from vmmtui.stream.events import (
    FdSnapshot,
    KcmpVerdict,
    Notice,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    StepDone,
)
from vmmtui.system.fdtable import FdTable
from vmmtui.words.troubleshooting import worded

PLAN = build_plan()


def memfd_config(tmp, **kw) -> SessionConfig:
    return SessionConfig(backend="memfd", size=kw.pop("size", 1 << 20), tmpdir=str(tmp), **kw)


def test_full_session_verifies_and_leaves_nothing(clean_state):
    events = []
    s = Session(memfd_config(clean_state))
    try:
        events += s.start()
        assert oct(os.stat(s.dir).st_mode & 0o777) == "0o700"
        pids = {r: w.pid for r, w in s.workers.items()}
        for e in s.run():
            events.append(e)
            if isinstance(e, FdSnapshot):
                # every fd a worker declares is what the kernel shows for that pid, right now
                table = FdTable.read(e.pid)
                for row in e.rows:
                    if row.check:
                        assert row.check == "ok", row
                        assert table.entries[row.fd].target == row.target
        dirpath = s.dir
    finally:
        events += s.close()
    done = [e for e in events if isinstance(e, StepDone)]
    assert [(e.role, e.step) for e in done] == PLAN
    finished = next(e for e in events if isinstance(e, SessionFinished))
    assert finished.verified and finished.integers == (1 << 20) // 4
    assert finished.fd_checks > 0 and finished.fd_problems == 0
    kc = [e for e in events if isinstance(e, KcmpVerdict)]
    assert kc and all(k.same is True for k in kc)
    exported = next(e for e in done if e.step == "export").report.state.exported_fd
    received = next(e for e in done if e.step == "receive").report.state.received_fd
    assert (kc[0].producer_fd, kc[0].consumer_fd) == (exported, received)
    assert isinstance(events[-1], SessionClosed) and events[-1].clean
    assert not os.path.exists(dirpath)
    for pid in pids.values():
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_log_lines_follow_the_seed(clean_state):
    with Session(memfd_config(clean_state, size=1000)) as s:
        s.start()
        lines = {(e.role, e.step): e.report.log for e in s.run() if isinstance(e, StepDone)}
    assert "Buffer size: 1000 bytes, aligned size: 4096 bytes" in lines[("producer", "query")]
    exported_line = lines[("producer", "export")][0]
    assert exported_line.startswith("Exported allocation as FD: ")
    assert lines[("consumer", "verify")][-1] == "Data verification PASSED (1024 integers verified)"
    assert lines[("producer", "wait_ack")] == ["Consumer verified data successfully!"]


def test_step_by_step_reports_fds_opened_and_closed(clean_state):
    s = Session(memfd_config(clean_state))
    try:
        s.start()
        seen = {}
        while not s.stopped:
            for e in s.step():
                if isinstance(e, StepDone):
                    seen[(e.role, e.step)] = e
        export = seen[("producer", "export")].report
        assert [h.kind for h in export.opened] == ["exported"]
        assert export.opened[0].target.startswith("/memfd:vmmtui-alloc")
        cleanup = seen[("consumer", "cleanup")].report
        received = seen[("consumer", "receive")].report.state.received_fd
        assert received in cleanup.closed
        assert {h.kind for h in cleanup.held} == {"control"}
    finally:
        s.close()


def test_worker_killed_mid_session_is_reported_and_cleaned(clean_state):
    s = Session(memfd_config(clean_state))
    events = []
    try:
        events += s.start()
        while s.next_step != ("consumer", "receive"):
            events += s.step()
        os.kill(s.workers["producer"].pid, signal.SIGKILL)
        s.workers["producer"].proc.wait()
        while not s.stopped:
            events += s.step()
        # the consumer still holds the fd it received: the allocation outlives the producer
        while not s.stopped:
            events += s.step()
    finally:
        events += s.close()
    assert s.failure is not None
    assert any(isinstance(e, SessionFailed) for e in events) or s.failure
    closed = events[-1]
    assert isinstance(closed, SessionClosed) and closed.clean


def test_producer_death_is_named_with_its_signal(clean_state):
    s = Session(memfd_config(clean_state))
    events = []
    try:
        events += s.start()
        events += s.step()
        os.kill(s.workers["producer"].pid, signal.SIGKILL)
        events += s.step()
    finally:
        events += s.close()
    failed = next(e for e in events if isinstance(e, SessionFailed))
    assert failed.failure.code == "WORKER_DIED"
    assert "SIGKILL" in failed.failure.message
    assert worded(failed.failure)[1]


def test_unusable_backend_refuses_to_start(clean_state):
    from vmmtui.backends import Choice

    s = Session(memfd_config(clean_state), Choice("cuda", "no driver", usable=False))
    with pytest.raises(SessionError):
        s.start()
    s.close()


def test_tmpdir_too_long_for_af_unix_falls_back_to_a_short_private_dir(tmp_path):
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    s = Session(SessionConfig(backend="memfd", tmpdir=str(deep)))
    try:
        events = s.start()
        moved = [
            e for e in events if isinstance(e, Notice) and "too long for a socket path" in e.text
        ]
        assert moved and not s.dir.startswith(str(deep))
        list(s.run())
        assert s.verified
    finally:
        s.close()
    assert os.listdir(deep) == [] and not os.path.exists(s.dir)


def test_world_writable_tmpdir_without_sticky_bit_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    s = Session(SessionConfig(backend="memfd", tmpdir=str(shared)))
    with pytest.raises(SessionError, match="sticky"):
        s.start()
    s.close()
    assert os.listdir(shared) == []
    shared.chmod(0o1777)
    with Session(SessionConfig(backend="memfd", tmpdir=str(shared))) as ok:
        ok.start()


def test_sweep_leaves_symlinks_and_does_not_claim_them(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "vmmtui-4194001-abc"
    link.symlink_to(target)
    assert sweep_stale_dirs(str(tmp_path)) == []
    assert link.is_symlink() and target.exists()


def test_stale_directories_of_dead_runs_are_swept(tmp_path):
    dead = tmp_path / "vmmtui-4194000-abc"
    dead.mkdir()
    (dead / "vmmtui.sock").write_text("")
    alive = tmp_path / f"vmmtui-{os.getppid()}-abc"
    alive.mkdir()
    assert sweep_stale_dirs(str(tmp_path)) == [str(dead)]
    assert alive.exists() and not dead.exists()


def test_session_fd_count_is_stable_over_repeated_runs(clean_state):
    def run_once():
        with Session(memfd_config(clean_state, size=8192)) as s:
            s.start()
            list(s.run())
            return s.verified

    assert run_once()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        assert run_once()
    assert len(os.listdir("/proc/self/fd")) == before
