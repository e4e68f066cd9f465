"""The worker on its own: both roles running all their steps at once, synchronised only by the socket."""

import json
import os
import socket
import subprocess
import sys

from vmmtui.protocol import LineChannel


def launch(role, sock_path, extra=()):
    parent, child = socket.socketpair()
    proc = subprocess.Popen([sys.executable, "-m", "vmmtui.worker", "--role", role, "--backend", "memfd",
                             "--size", "65536", "--socket", sock_path, "--control-fd", str(child.fileno()), *extra],
                            pass_fds=(child.fileno(),), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    child.close()
    ch = LineChannel(parent)
    hello = ch.receive(timeout=30)
    assert hello["type"] == "hello" and hello["pid"] == proc.pid
    return proc, ch


def reports(ch):
    out = []
    while True:
        msg = ch.receive(timeout=30)
        if msg is None or msg["type"] == "bye":
            return out
        out.append(msg["report"])
        if not msg["report"]["ok"] or msg["report"]["step"] == "cleanup":
            ch.send({"cmd": "quit"})


def test_run_all_steps_in_a_row_both_roles(tmp_path):
    path = str(tmp_path / "s.sock")
    p, pch = launch("producer", path)
    c, cch = launch("consumer", path)
    try:
        pch.send({"cmd": "run", "args": {"accept": {"expect_pid": c.pid}}})
        cch.send({"cmd": "run", "args": {"connect": {"expect_pid": p.pid}}})
        crep, prep = reports(cch), reports(pch)
        assert all(r["ok"] for r in prep + crep), [r["failure"] for r in prep + crep if not r["ok"]]
        assert crep[-2]["step"] == "ack" and prep[-1]["step"] == "cleanup"
        assert p.wait(10) == 0 and c.wait(10) == 0
        assert not os.path.exists(path)
    finally:
        for proc in (p, c):
            proc.kill()
            proc.wait()
            proc.stdout.close()
        pch.close()
        cch.close()


def test_connect_deadline_and_bad_commands(tmp_path):
    c, ch = launch("consumer", str(tmp_path / "nobody.sock"), ["--connect-timeout", "0.3"])
    try:
        ch.sock.sendall(b"garbage\n")
        assert ch.receive(timeout=10)["type"] == "error"
        ch.send({"cmd": "step", "step": "verify"})
        out_of_order = ch.receive(timeout=10)["report"]
        assert not out_of_order["ok"] and "out of order" in out_of_order["failure"]["message"]
        ch.send({"cmd": "step", "step": "init"})
        assert ch.receive(timeout=10)["report"]["ok"]
        ch.send({"cmd": "step", "step": "connect"})
        rep = ch.receive(timeout=10)["report"]
        assert not rep["ok"] and rep["failure"]["code"] == "ENOENT"
        assert rep["failure"]["fix"] == "start the producer first"
        ch.send({"cmd": "quit"})
        assert c.wait(10) == 0
        json.dumps(rep)
    finally:
        c.kill()
        c.wait()
        c.stdout.close()
        ch.close()


def test_a_consumer_whose_gpu_cannot_reach_the_producers_says_so():
    """Where peers cannot reach each other: a clear failure with a fix, not a crash."""
    import pytest

    from vmmtui.troubleshooting import StepError
    from vmmtui.worker import Worker, WorkerConfig

    w = Worker(WorkerConfig("consumer-2", "memfd", 65536, "/nonexistent", device=1, consumers=2))
    w.state.update(owner_device=0, device=1)
    w.backend.can_access_peer = lambda owner: False
    with pytest.raises(StepError) as e:
        w._check_peer()
    assert e.value.failure.code == "PEER_UNREACHABLE" and "device 1 cannot access memory on device 0" in e.value.failure.message
    assert "cuDeviceCanAccessPeer" in e.value.failure.call and e.value.failure.fix
    w.backend.can_access_peer = lambda owner: True
    w._check_peer()
    assert w.state["peer_access"] is True
