"""A realistic memfd session's events, built by hand from the contract dataclasses (no workers).

``session_batches`` returns what a Session would emit: the start, then one batch per plan step
(StepDone, both fd tables, kcmp once a consumer holds the received fd), then the close. The
renderers' tests feed these to the console, the transcript and the mounted app.
"""

from __future__ import annotations

import copy

from vmmtui.plan.steps import PRODUCER, base, build_plan, consumer_names, kind, peer_of
from vmmtui.stream.events import (
    Event,
    FdRow,
    FdSnapshot,
    KcmpVerdict,
    SessionClosed,
    SessionFinished,
    SessionStarted,
    StepDone,
    WorkerExited,
    WorkerStarted,
)
from vmmtui.stream.state import Mapping, Peer, StepReport, WorkerState
from vmmtui.stream.values import Ack, AllocMessage, Call, Verification

SIZE = 1 << 20
INTEGERS = SIZE // 4
SOCKET = "/tmp/vmmtui-4242-abcd1234/vmmtui.sock"
PRODUCER_PID = 4242
SAME = "same open file description"


def pid_of(role: str) -> int:
    return (
        PRODUCER_PID
        if role == PRODUCER
        else PRODUCER_PID + 1 + (consumer_names(8) + ["consumer"]).index(role)
    )


def _state(role: str, mechanism: str) -> WorkerState:
    return WorkerState(
        role,
        pid_of(role),
        "memfd",
        mechanism,
        "producer-writes",
        SIZE,
        SOCKET,
        device=0,
        device_name="CPU memory (memfd)",
    )


def _apply(s: WorkerState, fds: dict[int, str], step: str, consumers: int) -> list[str]:
    """Change the worker's state as the step would; returns its log lines."""
    role, name, peer = kind(s.role), base(step), peer_of(step)
    m = s.mapping
    if name == "query":
        s.granularity, s.alloc_size = 4096, SIZE
    elif name == "create":
        m.handle = 4
        fds[4] = "allocation"
    elif name == "reserve":
        m.va = 0x7F00_0000_0000 + (0x1000_0000 if role != PRODUCER else 0)
    elif name == "map":
        m.size = s.alloc_size
    elif name == "set_access":
        m.access = "read/write"
    elif name == "fill":
        s.integers = INTEGERS
    elif name == "export":
        s.exported_fd = 5
        fds[5] = "exported"
        return ["Exported allocation as FD: 5"]
    elif name == "listen":
        fds[6] = "listener"
    elif name == "accept":
        s.peers[peer] = Peer(pid_of(peer), 1000, 1000, 7)
        fds[7] = "connection"
    elif name == "send":
        s.sent = AllocMessage(SIZE, SIZE, 4096, 0, "CPU memory (memfd)", "memfd", s.mechanism)
    elif name == "wait_ack":
        s.acks[peer] = Ack(True, "verified", checked=INTEGERS)
        return ["Consumer verified data successfully!"]
    elif name == "connect":
        s.peers[PRODUCER] = Peer(PRODUCER_PID, 1000, 1000, 4)
        fds[4] = "connection"
    elif name == "receive":
        s.received_fd, s.alloc_size, s.granularity = 5, SIZE, 4096
        s.received = AllocMessage(SIZE, SIZE, 4096, 0, "CPU memory (memfd)", "memfd", s.mechanism)
        fds[5] = "received"
    elif name == "import":
        m.handle = 6
        fds[6] = "imported"
    elif name == "verify":
        s.verification = Verification(INTEGERS, 0, on="host")
        return [f"Data verification PASSED ({INTEGERS} integers verified)"]
    elif name == "cleanup":
        s.mapping = Mapping()
        s.exported_fd = s.received_fd = None
        for fd in [fd for fd in fds if fd != 3]:
            del fds[fd]
    return []


def _snapshot(role: str, fds: dict[int, str]) -> FdSnapshot:
    rows = [
        FdRow(
            fd,
            "/memfd:vmmtui-alloc (deleted)"
            if k in ("allocation", "exported", "received", "imported")
            else f"socket:[{9000 + fd}]",
            k,
            check="ok",
        )
        for fd, k in sorted(fds.items())
    ]
    rows.append(FdRow(0, "/dev/null", "other"))
    return FdSnapshot(role, pid_of(role), "S", rows)


def session_batches(consumers: int = 1, mechanism: str = "vmm") -> list[list[Event]]:
    """The start, one batch per plan step, and the close of a verified session."""
    plan = build_plan(mechanism, consumers)
    names = consumer_names(consumers)
    roles = [PRODUCER, *names]
    states = {r: _state(r, mechanism) for r in roles}
    fds: dict[str, dict[int, str]] = {r: {3: "control"} for r in roles}
    start: list[Event] = [
        SessionStarted(
            "memfd",
            "memfd backend requested (CPU memory, not GPU memory)",
            "",
            SIZE,
            SOCKET.rsplit("/", 1)[0],
            SOCKET,
            plan,
            mechanism,
            names,
        )
    ]
    start += [WorkerStarted(r, pid_of(r), "memfd") for r in roles]
    batches = [start]
    verdicts: dict[str, KcmpVerdict] = {}
    for index, (role, step) in enumerate(plan):
        s = states[role]
        log = _apply(s, fds[role], step, consumers)
        call = Call(
            base(step),
            {"fd": 3, "size": SIZE},
            "0x7f0000000000" if base(step) == "reserve" else "ok",
            12_345 + index,
        )
        report = StepReport(role, step, True, 1_000_000 + index, copy.deepcopy(s), [call], log)
        batch: list[Event] = [StepDone(index, report, 2_000_000, 1_000_000)]
        batch += [_snapshot(r, fds[r]) for r in roles]
        if mechanism == "vmm":
            for name in names:
                if 5 in fds[PRODUCER] and fds[name].get(5) == "received":
                    verdicts[name] = KcmpVerdict(PRODUCER_PID, 5, pid_of(name), 5, True, SAME, name)
                    batch.append(verdicts[name])
        batches.append(batch)
    finish: list[Event] = [
        SessionFinished(True, INTEGERS, 40, 0, mechanism, list(verdicts.values()))
    ]
    finish += [WorkerExited(r, pid_of(r), 0, None, True) for r in roles]
    finish.append(SessionClosed(True))
    batches[-1] += finish
    return batches


def session_events(consumers: int = 1, mechanism: str = "vmm") -> list[Event]:
    return [e for batch in session_batches(consumers, mechanism) for e in batch]
