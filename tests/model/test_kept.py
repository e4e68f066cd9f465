"""A long run's ledger keeps the newest closed entries and counts every one: its memory does not
grow with the trace's length, its counts stay whole."""

import tracemalloc

from vmmtui.model import kept
from vmmtui.model.kept import Kept
from vmmtui.model.ledger import Ledger
from vmmtui.pipeline.session import TraceSession
from vmmtui.stream.observed import (
    FdCloseCall,
    FdsReceived,
    FdsSent,
    MemfdCreated,
    SocketEnd,
    TraceFinished,
    TraceStarted,
)


def test_kept_drops_the_oldest_and_counts_them_all():
    k = Kept(range(5), limit=3, key=lambda x: x % 2)
    assert k == [2, 3, 4] and k.total == 5 and k.dropped == 2
    assert k.by == {0: 3, 1: 2}
    assert not Kept() and Kept([1], limit=0) and Kept([1], limit=0) == []
    k += [5, 7]  # as +=, remove and item assignment change it, the counts follow
    k.remove(5)
    k[-1] = 8
    assert k == [4, 8] and k.total == 6 and k.by == {0: 4, 1: 2}
    # an entry is found by identity from the newest end (refcounts replaces a finding just made
    # by its index: from the oldest end, each look compared every entry kept)
    a, b = [1], [1]
    k = Kept([a, b])
    assert k.index(b) == 1 and k.index([1]) == 0
    k.remove(b)
    assert k[0] is a and k.total == 1


def shares(n: int, first: int = 0):
    """``n`` memfds shared over a socket pair, every fd closed: the load of trace-bench.py."""
    a, b, t = 1000, 1001, 10**12 + first * 1000
    sock, back = SocketEnd(7, 8), SocketEnd(8, 7)
    for i in range(first, first + n):
        file, t = f"{i:012x}", t + 1000
        yield MemfdCreated(a, a, t, f"share-{i}", 4, file)
        yield FdsSent(a, a, t + 10, "sendmsg", sock, [4], [file], 1)
        yield FdCloseCall(a, a, t + 20, 4, file, 0)
        yield FdsReceived(b, b, t + 30, "recvmsg", back, [3], [file], 1)
        yield FdCloseCall(b, b, t + 40, 3, file, 0)


def test_a_ledger_keeps_the_newest_closed_entries_and_counts_every_share(monkeypatch):
    monkeypatch.setattr(kept, "LIMIT", 100)
    ledger = Ledger()
    for e in shares(1000):
        ledger.apply(e)
    assert len(ledger.history) == 100 and ledger.history.total == 2000
    assert len(ledger.transfers) == 100 and ledger.transfers.by == {"SCM_RIGHTS": 1000}
    assert len(ledger.findings) == 100 and ledger.findings.total == 1000
    assert sum(ledger.findings.by.values()) == 1000
    assert len(ledger.memfd_names) <= 200  # the names of files no longer held go
    assert ledger.history[-1].file == f"{999:012x}"  # the newest are the ones kept
    assert ledger.name(f"{999:012x}") == "share-999"


def test_the_count_of_a_long_run_is_whole_when_its_findings_are_not_all_kept(monkeypatch):
    monkeypatch.setattr(kept, "LIMIT", 50)

    class Source:
        stopping, pids = False, []

        def events(self, on_batch=None):
            yield TraceStarted("ebpf", [1000], ["load"], ktime0=10**12)
            yield from shares(300)
            yield TraceFinished(["load"], 0, None, 1500, 0, 1.0)

    session = TraceSession(Source(), live=False)
    list(session.events())
    assert session.finished is not None and session.finished.findings == 300
    assert session.count().good == 300 and len(session.ledger.findings) == 50


def test_a_ledgers_memory_is_flat_however_many_shares_it_folds(monkeypatch):
    """What the ledger holds after 8,000 more shares is what it held after the first 2,000."""
    monkeypatch.setattr(kept, "LIMIT", 500)
    ledger = Ledger()
    tracemalloc.start()
    try:
        for e in shares(2000):
            ledger.apply(e)
        before = tracemalloc.get_traced_memory()[0]
        for e in shares(8000, first=2000):
            ledger.apply(e)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert ledger.transfers.total == 10000
    assert after - before < 100_000, f"the ledger grew by {after - before} bytes"
