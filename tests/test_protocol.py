import socket

import pytest

from vmmtui.backends.base import Call
from vmmtui.protocol import HeldFd, LineChannel, ProtocolError, StepReport
from vmmtui.troubleshooting import failure


def test_step_report_round_trips_through_json():
    a, b = socket.socketpair()
    with a, b:
        held = HeldFd.of(a.fileno(), "control")
        report = StepReport("producer", "create", False, 123, [Call("cuMemCreate", {"size": 1}, "x", 5, False)],
                            ["line"], [held], [9], [held], {"va": 1}, failure("CUDA_ERROR_INVALID_VALUE", "cuMemCreate"))
        LineChannel(a).send({"type": "report", "report": report.to_dict()})
        got = LineChannel(b).receive(timeout=1)
    assert StepReport.from_dict(got["report"]) == report
    assert "granularity" in report.failure.cause


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
        with pytest.raises(TimeoutError):
            ch.receive(timeout=0.05)
        a.close()
        assert ch.receive(timeout=1) is None


def test_malformed_report_is_rejected():
    with pytest.raises(ProtocolError):
        StepReport.from_dict({"role": "producer"})
