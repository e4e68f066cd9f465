import json
import socket

import pytest

from vmmtui.stream.codec import encode
from vmmtui.stream.failures import failure
from vmmtui.stream.state import HeldFd, StepReport, WorkerState
from vmmtui.stream.values import Call
from vmmtui.wire.protocol import Hello, LineChannel, ProtocolError, decode_hello, decode_report
from vmmtui.words.troubleshooting import worded


def test_step_report_round_trips_through_json():
    a, b = socket.socketpair()
    with a, b:
        held = HeldFd.of(a.fileno(), "control")
        state = WorkerState("producer", 1, "memfd", "vmm", "producer-writes", 1, "/s")
        state.mapping.va = 1
        report = StepReport(
            "producer",
            "create",
            False,
            123,
            state,
            [Call("cuMemCreate", {"size": 1}, "x", 5, False)],
            ["line"],
            [held],
            [9],
            [held],
            failure("CUDA_ERROR_INVALID_VALUE", "cuMemCreate"),
        )
        LineChannel(a).send({"type": "report", "report": encode(report)})
        got = LineChannel(b).receive(timeout=1)
    assert decode_report(got["report"]) == report
    assert "granularity" in worded(report.failure)[0]


def test_hello_round_trips_and_a_wrong_one_is_a_protocol_error():
    a, b = socket.socketpair()
    with a, b:
        hello = Hello(
            "consumer-2",
            42,
            ["init", "connect"],
            "memfd",
            "memfd (CPU)",
            [HeldFd.of(a.fileno(), "control")],
        )
        LineChannel(a).send({"type": "hello", **encode(hello)})
        assert decode_hello(LineChannel(b).receive(timeout=1)) == hello
    with pytest.raises(ProtocolError):
        decode_hello({"type": "report"})
    with pytest.raises(ProtocolError, match="pid"):
        decode_hello(
            {
                "type": "hello",
                "role": "producer",
                "pid": "x",
                "steps": [],
                "backend": "",
                "label": "",
            }
        )


def test_malformed_and_unversioned_lines_are_protocol_errors():
    a, b = socket.socketpair()
    with a, b:
        ch = LineChannel(b)
        a.sendall(b"not json\n")
        with pytest.raises(ProtocolError):
            ch.receive(timeout=1)
        a.sendall(b'{"type": "hello"}\n')
        with pytest.raises(ProtocolError):
            ch.receive(timeout=1)
        a.sendall(b"[" * 100000 + b"\n")
        with pytest.raises(ProtocolError):
            ch.receive(timeout=1)
        with pytest.raises(TimeoutError):
            ch.receive(timeout=0.05)
        a.close()
        assert ch.receive(timeout=1) is None


def test_malformed_report_is_rejected():
    with pytest.raises(ProtocolError):
        decode_report({"role": "producer"})
    with pytest.raises(ProtocolError):
        decode_report("not an object")


def test_commands_are_typed_both_ways():
    """What the session sends is read back by the worker as the same typed command."""
    from vmmtui.wire.protocol import (
        Quit,
        RunAll,
        RunStep,
        StepArgs,
        command_message,
        decode_command,
    )

    for c in (
        RunStep("accept", StepArgs(expect_pid=42)),
        RunStep("init"),
        RunAll({"connect": StepArgs(7)}),
        Quit(),
    ):
        line = json.loads(json.dumps(command_message(c)))
        assert decode_command(line) == c
    assert command_message(RunStep("init")) == {
        "cmd": "step",
        "step": "init",
        "args": {"expect_pid": None},
    }
    for bad, says in [
        ({"cmd": "dance"}, "unknown command"),
        ({"cmd": "step"}, "lacks 'step'"),
        ({"cmd": "step", "step": "x", "args": "not an object"}, "expected an object"),
        ({"cmd": "step", "step": "x", "args": {"expect_pid": "1"}}, "expected int"),
    ]:
        with pytest.raises(ProtocolError, match=says):
            decode_command(bad)


def test_replies_are_typed_both_ways():
    """What a worker says is read back by the session as the same typed reply, never by key."""
    from vmmtui.wire.protocol import Bye, Report, WorkerError, decode_reply, reply_message

    report = StepReport(
        "producer",
        "init",
        True,
        5,
        WorkerState("producer", 1, "memfd", "vmm", "producer-writes", 64, "/s"),
    )
    for r in (
        Hello("producer", 7, ["init"], "memfd", "memfd"),
        Report(report),
        WorkerError("cannot read that"),
        Bye(),
    ):
        assert decode_reply(json.loads(json.dumps(reply_message(r)))) == r
    for bad, says in [
        ({"type": "gossip"}, "unexpected message"),
        ({"type": "report", "report": {"role": "producer"}}, "malformed step report"),
        ({"type": "hello", "role": "producer"}, "malformed hello"),
        ({"type": "error"}, "malformed error"),
    ]:
        with pytest.raises(ProtocolError, match=says):
            decode_reply(bad)
