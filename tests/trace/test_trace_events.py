"""Every trace event round-trips through JSON with non-empty fields, and none shadows another
event type of the stream (Event.types is keyed by class name)."""

import dataclasses
import inspect

import pytest

import vmmtui.stream.observed as te
from vmmtui.stream.events import Event

SOCK = te.SocketEnd(4242, 4243, "@nccl-socket-0-abc", "unix", "5a5a", "6b6b")
CUDA = te.CudaCall(
    10, 12, 109, "cuMemCreate", 1, 2 << 20, 1, 1, 0x10, 5, 0x7F00, 3, "ab" * 64, 1500, "a1"
)
REFUSED = te.CallRefused(
    11,
    "pidfd_getfd",
    "EPERM",
    10,
    "other pid ns",
    "share it",
    111,
    [te.RefusalCheck("pid namespace", False, "differs")],
    te.ProcessFacts(11, "importer", "python3", *[65534] * 6, 0, 0, 7, 8, 2, 1, 1),
    te.ProcessFacts(10, "exporter", "python3", *[1] * 6, 1 << 19, 1 << 19, 7, 9, 0, 0, 1),
    "1",
    te.RefusalReason.PTRACE,
    5,
    False,
)
EXAMPLES = [
    te.TraceStarted("ebpf", [10, 11], ["python3", "x.py"], True, "why", ["sendmsg"], ["cuda"], 7),
    te.FdsSent(10, 12, 99, "sendmsg", SOCK, [5, 6], ["a1", "b2"], 1, ["memfd:x", "memfd:y"], 3),
    te.FdsReceived(11, 13, 100, "recvmmsg", SOCK, [7, 8], ["a1", "b2"], 2, True, 4),
    te.PidfdOpened(11, 13, 101, 10, 9),
    te.FdTaken(11, 13, 102, 9, 10, 5, 10, "a1"),
    te.FdCloseCall(11, 13, 103, 3, "a1", 0, 20, "close_range"),
    te.FdDuplicated(11, 13, 104, "dup3", 5, 6, "a1"),
    te.MemfdCreated(10, 10, 105, "fixture", 5, "a1"),
    te.ProcessForked(10, 10, 106, 11, "python3"),
    te.ProcessExec(11, 11, 107, "/usr/bin/python3", "python3"),
    te.ProcessExit(11, 11, 108, 256, "python3"),
    CUDA,
    te.TraceLost(3, 110, 1, 105, 110),
    te.QueuedAtRelease(11, 11, 110, 4242, ("a1", "b2"), 2, "5a5a"),
    te.FdsDropped(11, 13, 111, "read", SOCK, ("a1",), 2),
    te.TraceFinished(
        ["python3"], 1, "SIGKILL", 20, 1, 0.5, 2, "ebpf", 1, 1, {"socket": 1}, {"close": 3}
    ),
    REFUSED,
    te.LedgerFinding(
        "unknown",
        11,
        112,
        10,
        "a1",
        40,
        105,
        110,
        "kcmp",
        fd=7,
        peer_fd=3,
        was="shared",
        via="SCM_RIGHTS",
        sock=te.SocketEnd(5, 6, "@x"),
        gap_ns=-4,
        fds=[7, 8],
        name="memfd",
        handle=1,
        peer_handle=2,
        ptr=3,
        peer_ptr=4,
        size=5,
        memory="file",
        how="received",
        pidfd=6,
        status=9,
        refusal=REFUSED,
        cuda=CUDA,
        road="scm-rights",
        exported_as="posix-fd",
        imported_as="posix-fd",
        ipc="ab" * 64,
        opens=[0xB1, 0xB2],
        closes=1,
        since=100,
        result=208,
    ),
    te.PinnedBytes(10, 115, 2 << 20, 1),
    te.TraceClock(116),
    te.CapabilityProbe(11, "cuMemCreate", "fabric-handles", "no-imex-channel", 800, 113),
    te.ProcessIdentity(11, "docker 3f2a1b4c5d6e", "1d2e3f40-5a6b-7c8d-9e0f-a1b2c3d4e5f6", 1, 114),
    te.MemoryMapped(11, 13, 117, 5, "a1", 0x7F00, 1 << 20, -12, 3, 1, 4096, "/dev/shm/x"),
    te.MemoryUnmapped(11, 13, 118, 0x7F00, 1 << 20, -22, "mremap", 0x8F00, 2 << 20),
]


def test_every_trace_event_is_in_the_examples():
    classes = {
        n
        for n, c in inspect.getmembers(te, inspect.isclass)
        if issubclass(c, Event)
        and c.__module__ == te.__name__
        and c not in (te.TraceEvent, te.TraceCall)
    }
    assert classes == {type(e).__name__ for e in EXAMPLES}


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: type(e).__name__)
def test_round_trip_with_every_field_set(event):
    for f in dataclasses.fields(event):
        assert getattr(event, f.name) not in ("", [], None), (type(event).__name__, f.name)
    back = Event.from_json(event.to_json())
    assert back == event
    assert back.to_json() == event.to_json()


def test_no_trace_event_shadows_another():
    for name, cls in inspect.getmembers(te, inspect.isclass):
        if issubclass(cls, Event) and cls.__module__ == te.__name__:
            assert Event.types[name] is cls, f"{name} is registered by another module too"


def test_to_json_written_out_is_the_encoders_text():
    """Each trace event's written-out JSON is byte for byte what the encoder makes of its dict,
    with untrusted names (C1, bidi, quotes, a lone surrogate) and values of an unexpected type
    (a bool where an int is declared) included, and reads back as the same event."""
    from vmmtui.stream.events import _ENCODE, Event
    from vmmtui.stream.names import json_safe
    from vmmtui.stream.observed import (
        CudaCall,
        FdCloseCall,
        FdsReceived,
        FdsSent,
        LedgerFinding,
        MemfdCreated,
        QueuedAtRelease,
        SocketEnd,
        TraceFinished,
        TraceStarted,
    )

    odd = 'é\u009b\x1b"\\\u202e\udcff'
    events = [
        FdCloseCall(1, 2, 3, 4, "abc", 0),
        MemfdCreated(1, 2, 3, odd, 4, "f"),
        FdsSent(1, 2, 3, "sendmsg", SocketEnd(5, 6, "@" + odd), [3, 4], ["a", odd], 1),
        FdsReceived(1, 2, 3, "recvmsg", SocketEnd(5, 6), [3], ["abc"], 1, truncated=True),
        QueuedAtRelease(1, 2, 3, 4, ("a", "b"), 2),
        LedgerFinding("shared", 1, file=odd, fd=3, name=odd),
        LedgerFinding(
            "imported", 1, sock=SocketEnd(5, 6, odd), cuda=CudaCall(1, 2, 3, odd, 0), opens=[1]
        ),
        TraceStarted("ebpf", [1], ["x"], True, "", ["p"], [], 0),
        TraceFinished(["x"], None, "SIGTERM", 5, 0, 1.5),
    ]
    for e in events:
        assert e.to_json() == json_safe(_ENCODE(e.to_dict()))
        assert Event.from_json(e.to_json()) == e
    unexpected = FdsSent(True, 2, 3, "sendmsg", SocketEnd(5), [1, True], [None], 1)  # type: ignore[arg-type]
    assert unexpected.to_json() == json_safe(_ENCODE(unexpected.to_dict()))
    odd_optional = LedgerFinding("shared", 1, sock=7, cuda="x")  # type: ignore[arg-type]
    assert odd_optional.to_json() == json_safe(_ENCODE(odd_optional.to_dict()))
    one_odd = FdsSent(1, 2, 3, "sendmsg", SocketEnd(5), [True], [odd], 1)  # type: ignore[list-item]
    assert one_odd.to_json() == json_safe(_ENCODE(one_odd.to_dict()))


def test_a_findings_json_carries_its_words_made_when_written_and_reads_back_to_its_facts():
    import json

    from vmmtui.words.findings import finding_words, json_line

    f = te.LedgerFinding(
        "shared", 11, 100, 10, "a1", fd=7, peer_fd=5, via="SCM_RIGHTS", sock=SOCK, gap_ns=2_000_000
    )
    line = json_line(f)
    data = json.loads(line)
    said = finding_words(f)
    assert (data["what"], data["detail"], data["fix"]) == (said.what, said.detail, said.fix)
    assert data["what"] == "fd 7 = pid 10's fd 5" and "2.000 ms after the send" in data["detail"]
    assert Event.from_json(line) == f  # the words are read past: the facts make them again
    assert "what" not in json.loads(f.to_json())


def test_a_findings_line_is_the_encoders_line_of_its_words_with_names_made_safe():
    """The finding's line is written from its fields' own line with the words appended: the same
    text as the encoder's line of ``worded``, every unsafe character of a name escaped in both."""
    import json

    from vmmtui.stream.events import line_of
    from vmmtui.words.findings import json_line, worded

    odd = 'memfd:x\u009b2J\u202e\u2028"q\\\n\u00e9'
    sock = te.SocketEnd(7, 8, odd)
    for f in (
        te.LedgerFinding("shared", 11, 100, 10, "a1", fd=7, peer_fd=5, via="SCM_RIGHTS", sock=sock),
        te.LedgerFinding("fd-never-closed", 11, 100, file="a1", fd=3, name=odd, opens=[1, 2]),
        te.LedgerFinding("unknown", 11, 100, was="shared", lost=2, fds=[4, 5], name=odd),
    ):
        line = json_line(f)
        assert line == line_of(worded(f))
        assert not any(ch in line for ch in "\u009b\u202e\u2028\n")
        assert Event.from_json(line) == f and json.loads(line)["what"] == worded(f)["what"]


def test_a_finding_made_quickly_is_the_finding_init_makes():
    """``LedgerFinding.of`` and ``but`` (the ledger's share path) make what ``__init__`` and
    ``dataclasses.replace`` make: equal, each with lists of its own, a wrong name refused."""
    f = te.LedgerFinding.of("shared", 11, 100, peer=10, file="a1", fd=7, sock=SOCK, gap_ns=5)
    assert f == te.LedgerFinding("shared", 11, 100, 10, "a1", fd=7, sock=SOCK, gap_ns=5)
    assert f.to_json() == te.LedgerFinding("shared", 11, 100, 10, "a1", fd=7, sock=SOCK,
                                           gap_ns=5).to_json()  # fmt: skip
    g = te.LedgerFinding.of("shared", 11)
    g.fds.append(3)
    assert te.LedgerFinding.of("shared", 11).fds == [] and te.LedgerFinding("x", 1).fds == []
    assert f.but(road="scm-rights", fd=8) == dataclasses.replace(f, road="scm-rights", fd=8)
    assert f.road == "" and f.fd == 7
    with pytest.raises(TypeError):
        te.LedgerFinding.of("shared", 11, colour="red")
    with pytest.raises(TypeError):
        f.but(colour="red")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.fd = 9  # type: ignore[misc]
    # both set the fields as they are: a finding validates nothing at __init__
    assert not hasattr(te.LedgerFinding, "__post_init__")
