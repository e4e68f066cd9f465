"""A memfd's holder outliving its maker is certain only where nothing was lost: a loss window
between the holder getting the file and the maker's exit may hold the holder's own exit or its
close, so the claim is then ``unknown`` with the loss (the flood run that said
held-after-exporter-died of a holder that had exited first, its exit record lost). The hold is
said once it outlasts one teardown window (``model/orphans.py``): the trace's clock ticks past
it."""

from vmmtui.model.ledger import Ledger
from vmmtui.stream.observed import (
    FdsReceived,
    FdsSent,
    MemfdCreated,
    ProcessExit,
    SocketEnd,
    TraceClock,
    TraceLost,
)

SOCK = SocketEnd(100, 101, "@m")
PEER = SocketEnd(101, 100, "@m")
A, B = 1000, 2000


def story(lost: TraceLost | None) -> list:
    ledger = Ledger()
    events = [
        MemfdCreated(A, A, 10, "m", 3, "f1"),
        FdsSent(A, A, 20, "sendmsg", SOCK, [3], ["f1"], 1),
        FdsReceived(B, B, 30, "recvmsg", PEER, [4], ["f1"], 1),
        *([lost] if lost else []),
        ProcessExit(A, A, 50, 0),
        TraceClock(50 + 3_000_000_000),  # the holder still holds 3 s later
    ]
    return [f for e in events for f in ledger.apply(e)]


def test_with_nothing_lost_the_holder_outliving_its_maker_is_said():
    found = [(f.kind, f.pid) for f in story(None)]
    assert ("held-after-exporter-died", B) in found


def test_a_loss_after_the_holder_got_it_makes_the_claim_unknown():
    found = story(TraceLost(5, ktime=40, cpu=1, t_first_ns=40, t_last_ns=41))
    assert "held-after-exporter-died" not in [f.kind for f in found]
    unknown = [f for f in found if f.kind == "unknown"]
    assert [(f.pid, f.was, f.lost) for f in unknown] == [(B, "held-after-exporter-died", 5)]


def test_a_loss_before_the_holder_got_it_overturns_nothing():
    found = story(TraceLost(5, ktime=25, cpu=1, t_first_ns=24, t_last_ns=25))
    assert ("held-after-exporter-died", B) in [(f.kind, f.pid) for f in found]


def test_the_possible_held_finding_keeps_a_paths_leading_slash():
    from vmmtui.stream.observed import LedgerFinding
    from vmmtui.words.findings import finding_words

    f = LedgerFinding(
        "possible-held-after-exporter-died", B, 50, peer=A, fd=4, peer_fd=3, name="/dev/shm/x"
    )
    assert "(/dev/shm/x)" in finding_words(f).detail
    memfd = LedgerFinding(
        "possible-held-after-exporter-died",
        B,
        50,
        peer=A,
        fd=4,
        peer_fd=3,
        name="/memfd:m (deleted)",
    )
    assert "(memfd m)" in finding_words(memfd).detail
