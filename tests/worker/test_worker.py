"""The worker on its own: both roles running all their steps at once, synchronised only by the socket."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from vmmtui.plan.config import WorkerConfig
from vmmtui.stream.codec import decode, encode
from vmmtui.stream.state import StepReport
from vmmtui.wire.protocol import LineChannel, decode_hello, decode_report
from vmmtui.words.troubleshooting import worded


def launch(role, sock_path, **extra):
    parent, child = socket.socketpair()
    cfg = WorkerConfig(role, "memfd", 65536, sock_path, control_fd=child.fileno(), **extra)
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmmtui.worker", *cfg.to_argv()],
        pass_fds=(child.fileno(),),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    child.close()
    ch = LineChannel(parent)
    hello = decode_hello(ch.receive(timeout=30))
    assert hello.pid == proc.pid and hello.role == role
    assert [h.kind for h in hello.held] == ["control"]
    return proc, ch


def stop(*launched) -> None:
    """Kill and reap workers from ``launch`` and close their channels (whatever the test did)."""
    for proc, ch in launched:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        ch.close()


def reports(ch) -> list[StepReport]:
    out = []
    while True:
        msg = ch.receive(timeout=30)
        if msg is None or msg["type"] == "bye":
            return out
        out.append(decode_report(msg["report"]))
        if not out[-1].ok or out[-1].step == "cleanup":
            ch.send({"cmd": "quit"})


def test_run_all_steps_in_a_row_both_roles(sock_dir):
    path = str(sock_dir / "s.sock")
    p, pch = launch("producer", path)
    c, cch = launch("consumer", path)
    try:
        pch.send({"cmd": "run", "args": {"accept": {"expect_pid": c.pid}}})
        cch.send({"cmd": "run", "args": {"connect": {"expect_pid": p.pid}}})
        crep, prep = reports(cch), reports(pch)
        assert all(r.ok for r in prep + crep), [r.failure for r in prep + crep if not r.ok]
        assert crep[-2].step == "ack" and prep[-1].step == "cleanup"
        done = {(r.role, r.step): r for r in prep + crep}
        exported = done[("producer", "export")].state.exported_fd
        received = done[("consumer", "receive")].state
        assert exported is not None and received.received_fd is not None
        assert (
            received.received == done[("producer", "send")].state.sent
        )  # the AllocMessage, both sides
        assert done[("producer", "accept")].state.peers["consumer"].pid == c.pid
        assert done[("consumer", "connect")].state.peers["producer"].pid == p.pid
        verified = done[("consumer", "verify")].state.verification
        assert verified.passed and verified.on == "host" and verified.checked == 65536 // 4
        assert done[("producer", "wait_ack")].state.acks["consumer"].verified
        mapping = done[("consumer", "map")].state.mapping
        assert mapping.size == 65536 and mapping.va_end == mapping.va + 65536
        assert done[("producer", "cleanup")].state.mapping.va is None
        logs = [line for r in prep + crep for line in r.log]
        assert "=== memfd (CPU memory, not GPU) Producer ===" in logs
        assert "Using the memfd backend: CPU memory (memfd)" in logs
        assert not [line for line in logs if "VMM support: yes" in line or "stream" in line]
        assert "Data verification PASSED (16384 integers verified)" in logs
        # every report is the typed contract through JSON and back
        for r in prep + crep:
            assert decode(StepReport, json.loads(json.dumps(encode(r)))) == r
        assert p.wait(10) == 0 and c.wait(10) == 0
        assert not os.path.exists(path)
    finally:
        stop((p, pch), (c, cch))


def test_consumer_writes_on_memfd_says_nothing_of_a_stream(sock_dir):
    path = str(sock_dir / "s.sock")
    p, pch = launch("producer", path, direction="consumer-writes")
    c, cch = launch("consumer", path, direction="consumer-writes")
    try:
        pch.send({"cmd": "run", "args": {"accept": {"expect_pid": c.pid}}})
        cch.send({"cmd": "run", "args": {"connect": {"expect_pid": p.pid}}})
        crep, prep = reports(cch), reports(pch)
        assert all(r.ok for r in prep + crep), [r.failure for r in prep + crep if not r.ok]
        wait = next(r for r in prep if r.step == "wait_ack")
        assert wait.log == ["Consumer wrote its slice [0, 16384)"]
        assert wait.state.acks["consumer"].slice == (0, 16384)
        assert next(r for r in crep if r.step == "write").state.write_on == "host"
    finally:
        stop((p, pch), (c, cch))


def test_connect_deadline_and_bad_commands(sock_dir):
    c, ch = launch("consumer", str(sock_dir / "nobody.sock"), connect_timeout=0.3)
    try:
        ch.sock.sendall(b"garbage\n")
        assert ch.receive(timeout=10)["type"] == "error"
        ch.send({"cmd": "step", "step": "verify"})
        out_of_order = decode_report(ch.receive(timeout=10)["report"])
        assert not out_of_order.ok and "out of order" in out_of_order.failure.message
        ch.send({"cmd": "step", "step": "init"})
        assert decode_report(ch.receive(timeout=10)["report"]).ok
        ch.send({"cmd": "step", "step": "connect"})
        rep = decode_report(ch.receive(timeout=10)["report"])
        assert not rep.ok and rep.failure.code == "ENOENT"
        assert worded(rep.failure)[1] == "start the producer first"
        ch.send({"cmd": "step", "step": "receive", "args": "not an object"})
        assert ch.receive(timeout=10)["type"] == "error"
        ch.send({"cmd": "quit"})
        assert c.wait(10) == 0
    finally:
        c.kill()
        c.wait()
        c.stdout.close()
        ch.close()


def test_a_consumer_whose_gpu_cannot_reach_the_producers_says_so():
    """Where peers cannot reach each other: a clear failure with a fix, not a crash."""
    from vmmtui.stream.failures import StepError
    from vmmtui.worker import consumer
    from vmmtui.worker.core import Worker

    w = Worker(WorkerConfig("consumer-2", "memfd", 65536, "/nonexistent", device=1, consumers=2))
    w.state.owner_device, w.state.device = 0, 1
    w.backend.can_access_peer = lambda owner: False
    with pytest.raises(StepError) as e:
        consumer.import_memory(w)
    assert (
        e.value.failure.code == "PEER_UNREACHABLE"
        and "device 1 cannot access memory on device 0" in e.value.failure.message
    )
    assert "cuDeviceCanAccessPeer" in e.value.failure.call and worded(e.value.failure)[1]
    w.backend.can_access_peer = lambda owner: True
    consumer._check_peer(w)
    assert w.state.peer_access is True


@pytest.mark.parametrize("how, code", [("exit", 3), ("kill", -9), ("segv", -11)])
def test_a_crash_at_a_step_kills_the_worker_the_way_asked(tmp_path, how, code):
    c, ch = launch("consumer", str(tmp_path / "s.sock"), crash=f"init:{how}")
    try:
        ch.send({"cmd": "step", "step": "init"})
        assert ch.receive(timeout=10) is None  # no report: the process is gone
        assert c.wait(10) == code
    finally:
        c.kill()
        c.wait()
        c.stdout.close()
        ch.close()


def test_noise_babble_and_raise_are_survived(tmp_path):
    from vmmtui.wire.protocol import ProtocolError

    for how in ("noise", "babble", "raise"):
        c, ch = launch("consumer", str(tmp_path / "s.sock"), crash=f"init:{how}")
        try:
            ch.send({"cmd": "step", "step": "init"})
            if how == "babble":
                with pytest.raises(ProtocolError):
                    ch.receive(timeout=10)
            report = decode_report(ch.receive(timeout=10)["report"])
            assert report.ok == (how != "raise")
            if how == "raise":
                assert (
                    report.failure.code == "PYTHON" and "injected crash" in report.failure.message
                )
            ch.send({"cmd": "quit"})
            assert c.wait(10) == 0
        finally:
            c.kill()
            c.wait()
            c.stdout.close()
            ch.close()


def test_sigint_is_ignored_and_sigterm_cleans_up_without_a_traceback(sock_dir):
    import signal

    path = str(sock_dir / "s.sock")
    p, ch = launch("producer", path)
    try:
        for step in (
            "init",
            "query",
            "create",
            "reserve",
            "map",
            "set_access",
            "fill",
            "export",
            "listen",
        ):
            ch.send({"cmd": "step", "step": step})
            assert decode_report(ch.receive(timeout=10)["report"]).ok
        assert os.path.exists(path)
        p.send_signal(signal.SIGINT)  # a Ctrl-C in the terminal reaches the whole process group
        ch.send(
            {"cmd": "step", "step": "accept", "args": {"expect_pid": 1}}
        )  # nobody comes: it waits
        time.sleep(0.3)
        assert p.poll() is None
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 128 + signal.SIGTERM
        assert ch.receive(timeout=10)["type"] == "bye"
        assert not os.path.exists(path)  # the last-chance release unlinked it
        out = p.stdout.read()
        assert b"Traceback" not in out and b"KeyboardInterrupt" not in out, out
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
        ch.close()


def test_worker_config_travels_as_argv_with_its_control_fd():
    cfg = WorkerConfig(
        "consumer-2",
        "memfd",
        4096,
        "/tmp/x/s.sock",
        device=1,
        ack_timeout=3.0,
        consumers=2,
        flags=["keep-received-fd", "free-with-wrong-call"],
        crash="init:noise",
        control_fd=7,
    )
    assert WorkerConfig.from_argv(cfg.to_argv()) == cfg
    assert "--control-fd" in cfg.to_argv()


def test_an_unknown_flag_is_refused_at_start(tmp_path):
    parent, child = socket.socketpair()
    cfg = WorkerConfig(
        "consumer",
        "memfd",
        4096,
        str(tmp_path / "s"),
        flags=["no-such-flag"],
        control_fd=child.fileno(),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "vmmtui.worker", *cfg.to_argv()],
        pass_fds=(child.fileno(),),
        capture_output=True,
        timeout=30,
    )
    child.close()
    parent.close()
    assert proc.returncode == 2 and b"unknown worker flag(s) no-such-flag" in proc.stderr


def test_keep_received_fd_flag_leaves_the_fd_open_and_declared(sock_dir):
    path = str(sock_dir / "s.sock")
    p, pch = launch("producer", path)
    c, cch = launch("consumer", path, flags=["keep-received-fd"])
    try:
        pch.send({"cmd": "run", "args": {"accept": {"expect_pid": c.pid}}})
        cch.send({"cmd": "run", "args": {"connect": {"expect_pid": p.pid}}})
        crep, prep = reports(cch), reports(pch)
        assert all(r.ok for r in prep + crep)
        received = next(r for r in crep if r.step == "receive").state.received_fd
        cleanup = crep[-1]
        assert f"SCENARIO: not closing the received fd {received}" in cleanup.log
        kept = [h for h in cleanup.held if h.kind == "received"]
        assert [h.fd for h in kept] == [received] and kept[0].target.startswith(
            "/memfd:vmmtui-alloc"
        )
        assert received not in cleanup.closed
    finally:
        stop((p, pch), (c, cch))


def mapped_files(pid: int) -> str:
    with open(f"/proc/{pid}/maps") as f:
        return f.read()


def test_hello_comes_before_the_backend_is_imported_and_quit_does_not_import_it(tmp_path):
    """The hello is on the start-up clock: numpy (and, for cuda, cuda.bindings) load in the init step.

    Read from /proc/PID/maps: numpy's C core is a shared object the worker maps once imported. After
    the hello the worker waits for a command, so what is mapped then is what the hello waited for."""
    p, ch = launch("producer", str(tmp_path / "s.sock"))
    try:
        assert "_multiarray_umath" not in mapped_files(p.pid)
        ch.send({"cmd": "step", "step": "init", "args": {}})
        report = decode_report(ch.receive(timeout=30)["report"])
        assert report.ok and report.state.backend_label.startswith("memfd"), report.failure
        assert "_multiarray_umath" in mapped_files(p.pid)  # the probe can fail: numpy loads at init
    finally:
        ch.send({"cmd": "quit"})
        p.wait(timeout=10)
    q, qch = launch("consumer", str(tmp_path / "t.sock"))
    try:
        qch.send({"cmd": "step", "step": "cleanup", "args": {}})  # a session closed before init
        report = decode_report(qch.receive(timeout=30)["report"])
        assert report.ok and "_multiarray_umath" not in mapped_files(q.pid), report.failure
    finally:
        qch.send({"cmd": "quit"})
        assert q.wait(timeout=10) == 0


def test_the_step_clock_stops_before_the_reports_snapshot_and_serve_needs_none(
    tmp_path, monkeypatch
):
    """The state's snapshot is the inspector's cost (its overhead), not the step's: a slow snapshot
    stays out of ``duration_ns``; the serve loop, which encodes each report at once, takes none."""
    import copy

    from vmmtui.worker import core

    w = core.Worker(WorkerConfig("producer", "memfd", 4096, str(tmp_path / "s")))
    real = copy.deepcopy

    def slow_copy(value, memo=None):
        time.sleep(2.0)
        return real(value, memo)

    monkeypatch.setattr(core.copy, "deepcopy", slow_copy)
    report = w.run_step("init")
    assert report.ok and report.state is not w.state and report.state == w.state
    assert report.duration_ns < 2_000_000_000  # the 2 s copy was made, outside the clock
    live = w.run_step("query", snapshot=False)
    assert live.ok and live.state is w.state
