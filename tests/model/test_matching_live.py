"""Receives matched to their sends on real processes and real syscalls, checked against what the
programs themselves say they sent (tests/fixtures/match_cases.py: each message carries its
sender's pid and fd in its bytes). The cases where "the oldest send of this open file" names the
wrong sender: one file sent over two sockets at once, and a file the kernel reused after an old
send of another was dropped by read(); and a read() that drops fds is said as such, not left in
flight. Root, BTF and libbpf: skipped with the reason elsewhere."""

import re
from pathlib import Path

import pytest

from tests.tracing import trace_program
from vmmtui.stream.observed import FdsDropped, FdsSent, LedgerFinding
from vmmtui.view.programs import ProgramsView, fold_program_event
from vmmtui.words.findings import finding_words

pytestmark = pytest.mark.usefixtures("ebpf")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "match_cases.py"


def trace(tmp_path: Path, *args: str) -> tuple[list[dict], list]:
    _, truth, events = trace_program(tmp_path, FIXTURE, *args)
    return truth, events


def senders(events: list) -> dict[tuple[int, int], tuple[int, int]]:
    """(receiver pid, fd) → (sender pid, fd), as the trace's "shared" findings say."""
    out = {}
    for f in events:
        if isinstance(f, LedgerFinding) and f.kind == "shared":
            m = re.fullmatch(r"fd (\d+) = pid (\d+)'s fd (\d+)", finding_words(f).what)
            if m:
                out[(f.pid, int(m[1]))] = (int(m[2]), int(m[3]))
    return out


def assert_every_receive_names_its_sender(truth: list[dict], events: list, n: int) -> None:
    got = senders(events)
    recvs = [t for t in truth if t["op"] == "recv"]
    assert len(recvs) == n
    wrong = [
        (t, got.get((t["pid"], t["fd"])))
        for t in recvs
        if got.get((t["pid"], t["fd"])) != (t["from_pid"], t["from_fd"])
    ]
    assert not wrong, f"{len(wrong)} of {n} receives name the wrong sender: {wrong[:3]}"


def test_one_file_sent_over_two_sockets_at_once_names_each_sender(tmp_path):
    truth, events = trace(tmp_path, "two-sockets", "2")
    assert_every_receive_names_its_sender(truth, events, 4)
    # what each file sent is, read in the kernel at the send
    assert [e.kinds for e in events if isinstance(e, FdsSent)] == [["memfd"]] * 4


@pytest.mark.slow
def test_a_file_at_a_reused_address_is_not_an_old_unreceived_send(tmp_path):
    truth, events = trace(tmp_path, "reuse", "20")
    sends = [e for e in events if isinstance(e, FdsSent)]
    dropped = {f for e in events if isinstance(e, FdsDropped) for f in e.files}
    # the kernel reused a freed struct file for a later send (else there is nothing to tell)
    reused = [
        e for e in sends if set(e.files) & dropped and e.pid not in {s.pid for s in sends[:1]}
    ]
    if not reused:
        pytest.skip("the kernel reused no freed file in 20 rounds: nothing to tell apart here")
    assert_every_receive_names_its_sender(truth, events, 20)
    drops = [f for f in events if isinstance(f, LedgerFinding) and f.kind == "fds-dropped"]
    x = sends[0].pid
    assert len(drops) == 20 and all(f.peer == x for f in drops)


@pytest.mark.slow
def test_an_fd_dropped_by_read_is_said_dropped_not_in_flight(tmp_path):
    truth, events = trace(tmp_path, "read-drop")
    [sent] = [t for t in truth if t["op"] == "sent"]
    [reader] = [t for t in truth if t["op"] == "dropped"]
    [drop] = [e for e in events if isinstance(e, FdsDropped)]
    assert (drop.pid, drop.call, drop.count) == (reader["pid"], "read", 1)
    [said] = [f for f in events if isinstance(f, LedgerFinding) and f.kind == "fds-dropped"]
    assert (said.pid, said.peer) == (reader["pid"], sent["pid"])
    assert f"fd {sent['fd']} of pid {sent['pid']}" in finding_words(said).what
    assert not [f for f in events if isinstance(f, LedgerFinding) and f.kind == "in-flight"]
    v = ProgramsView()
    for e in events:
        v = fold_program_event(v, e)
    assert not v.in_flight, list(v.in_flight.items())
