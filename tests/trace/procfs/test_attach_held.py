"""``attach`` over a process that already holds memory it received (issue 51): what it finds
held at attach came there unseen, so the verdicts never draw the green "nothing wrong found"
over it, under eBPF (``trace -p``'s frame 0) and under polling alike."""

from __future__ import annotations

import array
import json
import os
import socket
import subprocess
import sys
from functools import reduce

import pytest

from tests.trace.procfs.helpers import ROOT
from vmmtui.stream.events import Event, FdOpened

HOLDER = """
import array, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
fds = array.array("i")
_, anc, _, _ = sock.recvmsg(1, socket.CMSG_LEN(3 * fds.itemsize))
fds.frombytes(anc[0][2][: 3 * fds.itemsize])
sock.send(b"ok")
sys.stdin.read()  # holds the three until the test lets them go
"""


def verdicts(events: list[Event]) -> str:
    """The verdicts panel's head as the inspector draws it from this stream."""
    from textual._context import active_app
    from textual.app import App

    from vmmtui.tui.widgets.wire import VerdictsPanel
    from vmmtui.view.programs import ProgramsView, fold_program_event

    v = reduce(fold_program_event, events, ProgramsView())
    token = active_app.set(App())  # the panel wraps its rows with its app's console
    try:
        return VerdictsPanel()._findings(v).plain  # noqa: SLF001 (the panel's own text)
    finally:
        active_app.reset(token)


def _modes() -> list[str]:
    from vmmtui.trace.loader import why_not

    return ["--poll"] + ([] if why_not() else [""])


@pytest.mark.parametrize("mode", _modes())
def test_attach_over_three_received_memfds_draws_no_green_tick(mode):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(theirs.fileno())],
        pass_fds=[theirs.fileno()],
        stdin=subprocess.PIPE,
    )
    theirs.close()
    fds = []
    for i in range(3):
        fd = os.memfd_create(f"held-at-attach-{i}", 0)
        os.ftruncate(fd, 1 << 16)
        fds.append(fd)
    ours.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    assert ours.recv(8) == b"ok"
    for fd in fds:
        os.close(fd)  # the holder's are all that is left
    try:
        argv = ["attach", "--json", "--no-nvml", "--duration", "0.5", str(holder.pid)]
        res = subprocess.run(
            [sys.executable, "-m", "vmmtui", *argv] + ([mode] if mode else []),
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
        ours.close()
    events = [Event.from_dict(json.loads(x)) for x in res.stdout.splitlines() if x.startswith("{")]
    found = [e for e in events if isinstance(e, FdOpened) and "held-at-attach" in e.target]
    assert len(found) == 3 and {e.how for e in found} == {"present"}, found
    head = verdicts(events)
    assert "✓" not in head and "nothing wrong found" not in head, head
    assert "3 held at attach" in head, head


@pytest.mark.parametrize("mode", _modes())
def test_trace_p_counts_every_buffer_held_at_attach_fds_and_mappings_alike(mode):
    """held_at_attach.py: ten buffers held when the trace attaches, five by fd and five by a
    mapping alone; the exporter that held them too exits. Each of the ten is said held after it
    (old code: the five fds only, under eBPF and under polling)."""
    from tests.trace.procfs.helpers import FIXTURES

    fixture = subprocess.Popen(
        [sys.executable, str(FIXTURES / "held_at_attach.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=FIXTURES,
        env={**os.environ, "FIXTURE_HOLD": "1.0"},
    )  # fmt: skip
    assert fixture.stdout is not None and fixture.stdin is not None
    _, exporter, holder = fixture.stdout.readline().split()
    argv = ["trace", "--json", "--no-nvml", "-p", exporter, holder, "--duration", "30"]
    trace = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", *argv] + ([mode] if mode else []),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert trace.stdout is not None
    lines = []
    for line in trace.stdout:  # what was true at attach is read first: then the exporter goes
        lines.append(line)
        if '"MappingSeen"' in line or "memfd:held-9" in line:
            break
    fixture.stdin.write("\n")
    fixture.stdin.flush()
    assert fixture.wait(30) == 0
    trace.send_signal(2)  # the holder is gone too: end the trace
    out, _ = trace.communicate(timeout=60)
    events = [Event.from_dict(json.loads(x)) for x in lines + out.splitlines() if x.startswith("{")]
    held = [
        e for e in events
        if getattr(e, "kind", "") in ("possible-held-after-exporter-died", "possible-fd-after-peer")
        and e.pid == int(holder)
    ]  # fmt: skip
    said = sum(max(getattr(e, "pins", 0), 1) for e in held)
    assert said == 10, held
