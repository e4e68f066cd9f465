"""The pidfd road on memfd with real processes: the fd is taken with pidfd_getfd, not sent, and the
refusals people meet (seccomp, Yama, PID namespaces) happen for real; nothing is left behind."""

import os

import pytest

from tests.session.runs import closed_clean, report, run_scenario
from vmmtui.backends import pidfd
from vmmtui.plan.config import SessionConfig, WorkerConfig, validate
from vmmtui.plan.steps import CONSUMER, PRODUCER, step_info
from vmmtui.scenarios import SCENARIOS
from vmmtui.session import Session, SessionError
from vmmtui.stream.events import (
    KcmpVerdict,
    Notice,
    NoticeCode,
    ScenarioOutcome,
    SessionStarted,
    WorkerExited,
)
from vmmtui.stream.failures import StepError
from vmmtui.stream.state import Peer
from vmmtui.stream.values import AllocMessage
from vmmtui.words.notices import text_of
from vmmtui.words.troubleshooting import worded
from vmmtui.worker import transport
from vmmtui.worker.core import Worker

#: whether this host lets a process take a child's fd at all (a container's seccomp profile may not)
ROAD_WORKS, ROAD_DETAIL = pidfd.check_on_child()
needs_road = pytest.mark.skipif(not ROAD_WORKS, reason=f"pidfd_getfd refused here: {ROAD_DETAIL}")


def run_pidfd(tmp, **kw):
    s = Session(SessionConfig(backend="memfd", tmpdir=str(tmp), transport="pidfd", **kw))
    return s, s.lifetime()


@needs_road
def test_the_consumer_takes_the_fd_no_message_carries_it(clean_state):
    s, events = run_pidfd(clean_state)
    assert s.verified and closed_clean(events)
    assert next(e for e in events if isinstance(e, SessionStarted)).transport == "pidfd"
    send = report(events, PRODUCER, "send")
    sendmsg = next(c for c in send.calls if c.name == "sendmsg")
    assert sendmsg.args["SCM_RIGHTS"] == "none"
    assert send.state.sent.pid == send.state.pid and send.state.sent.fd == send.state.exported_fd
    receive = report(events, CONSUMER, "receive")
    names = [c.name for c in receive.calls]
    assert names.index("recvmsg") < names.index("pidfd_open") < names.index("pidfd_getfd")
    assert "fds []" in next(c for c in receive.calls if c.name == "recvmsg").result
    taken = next(h for h in receive.held if h.kind == "received")
    assert taken.note.startswith("taken with pidfd_getfd") and "memfd:vmmtui-alloc" in taken.target
    assert not [h for h in receive.held if h.kind == "pidfd"], "the pidfd is closed at once"
    delta = [text_of(e) for e in events if isinstance(e, Notice) and e.code == NoticeCode.FD_DELTA]
    assert delta and "taken with pidfd_getfd: no message carried it" in delta[0]
    verdicts = [e for e in events if isinstance(e, KcmpVerdict)]
    assert verdicts and all(v.same for v in verdicts)
    assert verdicts[0].producer_fd == send.state.exported_fd
    assert verdicts[0].consumer_fd == taken.fd


@needs_road
def test_three_consumers_each_take_the_fd(clean_state):
    s, events = run_pidfd(clean_state, consumers=3)
    assert s.verified and closed_clean(events)
    assert {v.consumer for v in s.kcmp.values() if v.same} == {
        "consumer-1",
        "consumer-2",
        "consumer-3",
    }


def test_a_pid_from_the_wire_that_is_not_the_peer_is_refused(tmp_path):
    """SO_PEERCRED names the producer; a message naming another pid takes nothing from it."""
    cfg = WorkerConfig(CONSUMER, "memfd", 4096, str(tmp_path / "s"), transport="pidfd")
    w = Worker(cfg)
    w.state.peers[PRODUCER] = Peer(os.getpid() + 1_000_000, os.getuid(), os.getgid())
    meta = AllocMessage(4096, 4096, 4096, 0, "", "memfd", "vmm", transport="pidfd")
    meta.pid, meta.fd = os.getppid(), 0
    fds = set(os.listdir("/proc/self/fd"))
    with pytest.raises(StepError) as got:
        transport.take(w, meta)
    assert got.value.failure.code == "PEER_REFUSED" and "SO_PEERCRED" in got.value.failure.message
    assert set(os.listdir("/proc/self/fd")) == fds
    meta.pid = 0
    with pytest.raises(StepError, match="BAD_MESSAGE"):
        transport.take(w, meta)


def test_seccomp_scenario_refuses_pidfd_getfd_with_eperm(clean_state):
    s, events = run_scenario(clean_state, "pidfd-seccomp")
    assert s.failure.code == "EPERM" and s.failed_at == (CONSUMER, "receive")
    assert s.failure.call == "pidfd_getfd (seccomp)" and "SYS_PTRACE" in worded(s.failure)[1]
    init = report(events, CONSUMER, "init")
    assert any(c.name.startswith("prctl(PR_SET_NO_NEW_PRIVS)") and c.ok for c in init.calls)
    receive = [e for e in events if getattr(e, "step", "") == "receive" and hasattr(e, "report")]
    calls = {c.name: c for c in receive[0].report.calls}
    assert calls["pidfd_open"].ok and not calls["pidfd_getfd"].ok
    assert s.outcome.as_expected and closed_clean(events)


def test_the_seccomp_filter_is_seven_instructions_refusing_one_call():
    program = pidfd.deny_filter(pidfd.AUDIT_ARCH["x86_64"])
    assert len(program) == 7 * 8
    assert pidfd.SYS_PIDFD_GETFD.to_bytes(4, "little") in program
    assert (pidfd.SECCOMP_RET_ERRNO | 1).to_bytes(4, "little") in program  # EPERM


def test_pidns_scenario_the_pid_names_nobody(clean_state):
    if pidfd.new_pidns_allowed():
        pytest.skip(pidfd.new_pidns_allowed())
    s, events = run_scenario(clean_state, "pidfd-pidns")
    assert s.failed_at == (CONSUMER, "receive")
    assert s.failure.code in ("ESRCH", "PIDFD_WRONG_PROCESS")
    assert "PID namespace" in worded(s.failure)[0] and "SCM_RIGHTS" in worded(s.failure)[1]
    assert s.outcome.as_expected and closed_clean(events)


def test_yama_scenario_runs_or_says_why_not(clean_state):
    why = SCENARIOS["pidfd-yama"].why_not("memfd")
    if why:
        assert "Yama" in why or "ptrace_scope" in why or "CAP_SYS_PTRACE" in why
        with pytest.raises(SessionError, match="pidfd-yama cannot be shown on this host"):
            Session(
                SessionConfig(backend="memfd", tmpdir=str(clean_state), scenario="pidfd-yama")
            ).start()
        return
    s, events = run_scenario(clean_state, "pidfd-yama")
    assert s.failure.code == "EPERM" and s.failure.call.startswith("pidfd_getfd")
    if pidfd.seccomp_mode()[0] != 2:  # under a container's filter too, the two cannot be told apart
        assert s.failure.call == "pidfd_getfd (Yama)" and "PR_SET_PTRACER" in worded(s.failure)[1]
    assert s.outcome.as_expected and closed_clean(events)


def test_importer_pins_the_memory_after_the_producer_exits(clean_state):
    s, events = run_scenario(clean_state, "importer-pins")
    assert s.verified and s.outcome.as_expected and closed_clean(events)
    kinds = [
        ("exit", e.role)
        if isinstance(e, WorkerExited)
        else ("verify", e.report.role)
        if getattr(e, "step", "") == "verify" and hasattr(e, "report")
        else None
        for e in events
    ]
    kinds = [k for k in kinds if k]
    assert kinds.index(("exit", PRODUCER)) < kinds.index(("verify", CONSUMER))
    maps = [e.text for e in events if isinstance(e, Notice) and e.text.startswith("kernel:")]
    assert "still maps /memfd:vmmtui-alloc" in maps[0]
    assert "holds no /memfd:vmmtui-alloc mapping" in maps[-1]
    outcome = next(e for e in events if isinstance(e, ScenarioOutcome))
    assert outcome.outcome == "verified"


def test_pidfd_needs_an_fd_and_pools_need_cuda():
    legacy = validate(SessionConfig(mechanism="legacy", transport="pidfd"), "cuda")
    assert "legacy IPC has none" in legacy
    pool = validate(SessionConfig(mechanism="pool"), "memfd")
    assert pool.startswith("memory pools are a CUDA road")
    assert "unknown transport" in validate(SessionConfig(transport="carrier-pigeon"), "memfd")


def test_worker_argv_carries_the_transport():
    cfg = WorkerConfig(CONSUMER, "memfd", 4096, "/tmp/x", transport="pidfd")
    assert WorkerConfig.from_argv(cfg.to_argv()).transport == "pidfd"


def test_the_teaching_text_follows_the_transport():
    assert "pidfd_getfd" in step_info(CONSUMER, "receive", "vmm", "pidfd").teaching
    assert "PR_SET_PTRACER" in step_info(PRODUCER, "send", "vmm", "pidfd").apis[0]
    assert step_info(CONSUMER, "receive", "legacy", "pidfd").title == "Receive the handle bytes"
    assert step_info(CONSUMER, "receive").title == "Receive the fd"


def test_producer_gone_before_the_take_is_esrch(clean_state):
    s, events = run_scenario(clean_state, "pidfd-producer-gone")
    assert s.failure.code == "ESRCH" and s.failed_at == (CONSUMER, "receive")
    assert s.failure.call == "pidfd_open" and "exited" in worded(s.failure)[0]
    assert any(isinstance(e, WorkerExited) and e.role == PRODUCER for e in events)
    assert s.outcome.as_expected and closed_clean(events)


@needs_road
@pytest.mark.parametrize(
    "role,step", [("producer", "send"), ("consumer", "receive"), ("consumer", "verify")]
)
def test_a_worker_killed_on_the_pidfd_road_leaves_nothing(clean_state, role, step):
    s = Session(
        SessionConfig(
            backend="memfd", tmpdir=str(clean_state), transport="pidfd", crash=f"{role}:{step}:kill"
        )
    )
    events = s.lifetime()
    assert s.failure.code == "WORKER_DIED" and s.failed_at == (role, step)
    assert closed_clean(events)


def test_dropping_the_effective_cap_refuses_nothing_by_itself():
    """The pidfd-yama consumer's capset leaves the permitted set, so only Yama can refuse: a real process."""
    import subprocess
    import sys

    code = (
        "from vmmtui.backends import pidfd; d = pidfd.drop_effective_cap_sys_ptrace(); "
        "print(d, pidfd.has_cap_sys_ptrace(), pidfd.check_on_child()[0], "
        "int(pidfd._status()['CapPrm'], 16) >> 19 & 1)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    dropped, effective, works, permitted = out.stdout.split()
    assert effective == "False" and works == str(ROAD_WORKS)
    if dropped == "True":  # root, or CAP_SYS_PTRACE granted: the permitted set keeps it
        assert permitted == "1"


def test_a_producer_whose_socket_hung_up_is_not_taken_from(tmp_path):
    """Its pid may name another process by now: a live process holds that pid here, the socket's peer
    end is closed, and nothing is taken (no fd arrives, the pidfd is closed)."""
    import socket
    import subprocess
    import sys

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        b.close()
        w = Worker(WorkerConfig(CONSUMER, "memfd", 4096, str(tmp_path / "s"), transport="pidfd"))
        w.sock = a
        w.state.peers[PRODUCER] = Peer(other.pid, os.getuid(), os.getgid())
        meta = AllocMessage(4096, 4096, 4096, 0, "", "memfd", "vmm", transport="pidfd")
        meta.pid, meta.fd = other.pid, 0
        fds = set(os.listdir("/proc/self/fd"))
        with pytest.raises(StepError) as got:
            transport.take(w, meta)
        assert (
            got.value.failure.code == "PEER_CLOSED" and "nothing taken" in got.value.failure.message
        )
        assert set(os.listdir("/proc/self/fd")) == fds
    finally:
        a.close()
        other.kill()
        other.wait()
